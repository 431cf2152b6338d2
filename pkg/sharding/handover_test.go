package sharding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestAtRestOnlyMembershipIsWritten: once the buckets are placed, each
// replica writes its membership Lease once per renew period and no bucket
// Lease, whatever the number of buckets.
func TestAtRestOnlyMembershipIsWritten(t *testing.T) {
	for _, buckets := range []int{DefaultBuckets, MaxBuckets} {
		t.Run(fmt.Sprint(buckets), func(t *testing.T) {
			store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
			var ms []*Manager
			for _, id := range []string{"courier-a", "courier-b", "courier-c"} {
				m := newTestManager(t, store, clk, id, nil)
				m.cfg.Buckets = buckets
				ms = append(ms, m)
			}
			converge(clk, 5, ms...)
			held := 0
			for _, m := range ms {
				held += len(m.Held())
			}
			if held != buckets {
				t.Fatalf("%d buckets held after converging, want %d", held, buckets)
			}
			store.mu.Lock()
			clear(store.writes)
			store.mu.Unlock()
			const window = time.Minute
			converge(clk, int(window/DefaultRetryPeriod), ms...)
			store.mu.Lock()
			defer store.mu.Unlock()
			for name, n := range store.writes {
				if !strings.HasPrefix(name, MemberLeasePrefix) {
					t.Errorf("%s written %d times at rest", name, n)
				} else if max := int(window / DefaultRenewPeriod); n > max || n == 0 {
					t.Errorf("%s written %d times in %s, want 1 to %d", name, n, window, max)
				}
			}
			if len(store.writes) != len(ms) {
				t.Errorf("Leases written at rest: %v, want one per replica", store.writes)
			}
		})
	}
}

// TestFencedHolderDropsEverything: a holder that stalls (a pause, a
// partition) past the lease duration is fenced and its buckets taken,
// and at no point do two replicas own one bucket; when it comes back its
// renewal conflicts, it finds its membership Lease fenced, reports every
// bucket lost and takes part again from nothing, getting back by release
// the buckets it is the desired owner of.
func TestFencedHolderDropsEverything(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	ra := &recorder{}
	a := newTestManager(t, store, clk, "courier-a", ra)
	b := newTestManager(t, store, clk, "courier-b", nil)
	converge(clk, 3, a, b)
	aBuckets := a.Held()
	checkOneOwner := func() {
		t.Helper()
		for bucket := 0; bucket < DefaultBuckets; bucket++ {
			if a.Owns(bucket) && b.Owns(bucket) {
				t.Fatalf("bucket %d owned by both at %s", bucket, clk.Since(t0))
			}
		}
	}
	for range int(2 * DefaultLeaseDuration / DefaultRetryPeriod) { // a stalls
		b.step(context.Background())
		checkOneOwner()
		advance(clk, DefaultRetryPeriod)
	}
	if got := b.Held(); !slices.Equal(got, allBuckets()) {
		t.Fatalf("b holds %v after a stalled, want all", got)
	}
	if h := store.holder(MemberLeasePrefix + "courier-a"); h != "" {
		t.Fatalf("a's membership Lease names %q, want it fenced", h)
	}
	lostBefore := len(ra.lost)
	converge(clk, 6, a, b)
	checkOneOwner()
	if len(ra.lost) == lostBefore {
		t.Error("a was not told it lost its buckets when it found itself fenced")
	}
	if got := a.Held(); !slices.Equal(got, aBuckets) {
		t.Errorf("a holds %v after coming back, want its buckets %v again", got, aBuckets)
	}
	if term, _ := a.Term(aBuckets[0]); term.Holder != "courier-a" || term.Transitions < 2 {
		t.Errorf("a's bucket %d in term %+v, want a new one (taken by b, then back)", aBuckets[0], term)
	}
}

// TestAStaleObservationDoesNotFence: a replica whose watch lags sees a
// live holder's membership Lease unrenewed for the lease duration; its
// fence conflicts (the holder renewed since), so it takes nothing and
// reads the Lease again.
func TestAStaleObservationDoesNotFence(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	a := newTestManager(t, store, clk, "courier-a", nil)
	b := newTestManager(t, store, clk, "courier-b", nil)
	converge(clk, 3, a, b)
	aBuckets := a.Held()
	store.subs = slices.DeleteFunc(store.subs, func(m *Manager) bool { return m == b }) // b's watch stops
	converge(clk, int(DefaultLeaseDuration/DefaultRetryPeriod)+1, a, b)
	if got := a.Held(); !slices.Equal(got, aBuckets) {
		t.Errorf("a holds %v, want %v", got, aBuckets)
	}
	for _, bucket := range aBuckets {
		if b.Owns(bucket) {
			t.Errorf("b took bucket %d of a live holder", bucket)
		}
	}
	if h := store.holder(MemberLeasePrefix + "courier-a"); h != "courier-a" {
		t.Errorf("a's membership Lease names %q, want courier-a", h)
	}
}

// TestTwoClaimantsOneWinner: two replicas that both take themselves for
// the desired owner (their membership views differ) claim one released
// bucket, the second from an observation the first's claim made stale,
// and two that fence the same gone holder at once: in each case one
// claim lands and the other fails on the resourceVersion.
func TestTwoClaimantsOneWinner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		holder *string // the bucket's holder before the claims
	}{
		{name: "released", holder: nil},
		{name: "gone holder", holder: ptr.To("courier-gone")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
			ctx := context.Background()
			mustCreate(t, store, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: bucketLeaseName(3), Labels: map[string]string{BucketLabel: "true"}},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: tc.holder, LeaseTransitions: ptr.To[int32](4)},
			})
			mustCreate(t, store, labelled(memberLease("courier-gone", "", nil)))
			x := newTestManager(t, store, clk, "courier-x", nil)
			y := newTestManager(t, store, clk, "courier-y", nil)
			advance(clk, DefaultLeaseDuration)
			x.renewMember(ctx, clk.Now())
			y.renewMember(ctx, clk.Now())
			store.subs = nil // neither sees the other's claim
			gotX, gotY := x.acquire(ctx, clk.Now(), 3), y.acquire(ctx, clk.Now(), 3)
			if gotX == gotY || x.Owns(3) == y.Owns(3) {
				t.Fatalf("acquired: x %v, y %v; owns: x %v, y %v; want exactly one", gotX, gotY, x.Owns(3), y.Owns(3))
			}
			if term, _ := x.Term(3); term.Transitions != 5 {
				t.Errorf("the winner's term %+v, want transitions 5", term)
			}
		})
	}
}

// TestAMissingMembershipIsWaitedOut: a bucket naming a holder whose
// membership Lease this replica does not see is taken only once it has
// been missing for a lease duration and a read confirms it; a Lease the
// watch has not delivered (the control) is found by that read and its
// holder waited out as any other.
func TestAMissingMembershipIsWaitedOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored bool // the holder's membership Lease exists, unseen
	}{{name: "missing"}, {name: "not yet seen", stored: true}} {
		t.Run(tc.name, func(t *testing.T) {
			store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
			mustCreate(t, store, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: bucketLeaseName(3), Labels: map[string]string{BucketLabel: "true"}},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("courier-old")},
			})
			m := newTestManager(t, store, clk, "courier-0", nil)
			if tc.stored {
				store.subs = nil
				mustCreate(t, store, labelled(memberLease("courier-old", "", nil)))
				store.subs = []*Manager{m}
			}
			var takenAt time.Duration = -1
			for clk.Since(t0) <= 3*DefaultLeaseDuration && takenAt < 0 {
				m.step(context.Background())
				if m.Owns(3) {
					takenAt = clk.Since(t0)
				}
				advance(clk, DefaultRetryPeriod)
			}
			switch {
			case !tc.stored && (takenAt < 2*DefaultLeaseDuration-DefaultRetryPeriod || takenAt > 2*DefaultLeaseDuration+DefaultRetryPeriod):
				// Seen unchanged for one lease duration, then missing for another.
				t.Errorf("bucket 3 taken at %s, want about %s", takenAt, 2*DefaultLeaseDuration)
			case tc.stored && (takenAt >= 0 && takenAt < 3*DefaultLeaseDuration-DefaultRetryPeriod):
				t.Errorf("bucket 3 taken at %s though its holder's membership Lease exists", takenAt)
			}
		})
	}
}

// mustCreate stores l in store.
func mustCreate(t *testing.T, store *fakeLeases, l *coordinationv1.Lease) {
	t.Helper()
	if _, err := store.Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// labelled is a membership Lease with the label the informer selects on.
func labelled(l *coordinationv1.Lease) *coordinationv1.Lease {
	l.Labels = map[string]string{MemberLabel: "true"}
	return l
}
