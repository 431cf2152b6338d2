package sharding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func allBuckets() []int {
	out := make([]int, DefaultBuckets)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestAloneAcquiresEveryBucket(t *testing.T) {
	store, clk, r := newFakeLeases(), testclock.NewFakeClock(t0), &recorder{}
	m := newTestManager(t, store, clk, "courier-0", r)
	m.step(context.Background())
	if got := m.Held(); !slices.Equal(got, allBuckets()) {
		t.Fatalf("Held = %v, want all 64", got)
	}
	if len(r.gained) != 1 || !slices.Equal(r.gained[0], allBuckets()) || len(r.lost) != 0 {
		t.Errorf("OnChange gained %v lost %v, want one call with all 64 gained", r.gained, r.lost)
	}
	if got, _ := m.Term(7); got != (Term{Holder: "courier-0", Transitions: 0, Here: true}) {
		t.Errorf("Term(7) = %+v", got)
	}
	if h := store.holder(MemberLeasePrefix + "courier-0"); h != "courier-0" {
		t.Errorf("membership Lease holder = %q", h)
	}
	if v, err := testutil.GetGaugeMetricValue(bucketsHeld.WithLabelValues("courier-0")); err != nil || v != 64 {
		t.Errorf("courier_shard_buckets_held = %v (%v), want 64", v, err)
	}
}

// converge steps every manager n times, a retry period apart.
func converge(clk *testclock.FakeClock, n int, ms ...*Manager) {
	for i := 0; i < n; i++ {
		for _, m := range ms {
			m.step(context.Background())
		}
		advance(clk, DefaultRetryPeriod)
	}
}

// TestJoinersGetTheirBucketsAndDeliveryStopsBeforeRelease: the first
// replica takes every bucket; two more join and get exactly the buckets
// rendezvous hashing gives them, from releases (not expiry), and the first
// replica is told to stop delivering each bucket while its Lease still
// names it.
func TestJoinersGetTheirBucketsAndDeliveryStopsBeforeRelease(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	ra := &recorder{}
	ra.onLost = func(lost []int) {
		for _, b := range lost {
			if h := store.holder(bucketLeaseName(b)); h != "courier-a" {
				t.Errorf("bucket %d: OnChange(lost) ran after the release (holder %q)", b, h)
			}
		}
	}
	a := newTestManager(t, store, clk, "courier-a", ra)
	a.step(context.Background())
	b := newTestManager(t, store, clk, "courier-b", nil)
	c := newTestManager(t, store, clk, "courier-c", nil)
	converge(clk, 3, b, c, a)
	members := []string{"courier-a", "courier-b", "courier-c"}
	for bucket := 0; bucket < DefaultBuckets; bucket++ {
		want := DesiredOwner(bucket, members)
		var owners []string
		for _, m := range []*Manager{a, b, c} {
			if m.Owns(bucket) {
				owners = append(owners, m.cfg.Identity)
			}
		}
		if len(owners) != 1 || owners[0] != want {
			t.Errorf("bucket %d owned by %v, want only %s", bucket, owners, want)
		}
		// Every replica reports the same term, and only its holder says Here.
		for _, m := range []*Manager{a, b, c} {
			got, ok := m.Term(bucket)
			wantTerm := Term{Holder: want, Here: m.cfg.Identity == want}
			if want != "courier-a" {
				wantTerm.Transitions = 1 // taken by a, released, taken by its owner
			}
			if !ok || got != wantTerm {
				t.Errorf("%s: Term(%d) = %+v, %v, want %+v", m.cfg.Identity, bucket, got, ok, wantTerm)
			}
		}
	}
	if len(ra.lost) == 0 {
		t.Error("courier-a was never told to stop delivering")
	}
	// Well under the lease duration: the hand-over came from releases.
	if elapsed := clk.Since(t0); elapsed >= DefaultLeaseDuration {
		t.Errorf("converged after %s, not before expiry", elapsed)
	}
}

// TestATakenBucketIsDropped: a bucket Lease written by hand to name
// another holder in a later term ends this replica's term for it at the
// next pass; a write that does not take it (the control: same holder)
// changes nothing.
func TestATakenBucketIsDropped(t *testing.T) {
	store, clk, r := newFakeLeases(), testclock.NewFakeClock(t0), &recorder{}
	m := newTestManager(t, store, clk, "courier-0", r)
	m.step(context.Background())
	for _, tc := range []struct {
		bucket int
		holder string
	}{{4, "courier-0"}, {3, "someone-else"}} {
		l, _ := store.Get(context.Background(), bucketLeaseName(tc.bucket), metav1.GetOptions{})
		l.Spec.HolderIdentity = ptr.To(tc.holder)
		l.Spec.LeaseTransitions = ptr.To(transitions(l) + 1)
		if _, err := store.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.dropTaken(); !slices.Equal(got, []int{3}) {
		t.Errorf("dropTaken = %v, want [3]", got)
	}
	if m.Owns(3) || !m.Owns(4) {
		t.Errorf("Owns(3) = %v, Owns(4) = %v after bucket 3 was taken by hand", m.Owns(3), m.Owns(4))
	}
}

// TestDeadlineEndsTheTerm: with the upstream unreachable, Owns turns false
// exactly RenewDeadline after the last successful renewal was sent, before
// the loop runs; the loop then reports the loss.
func TestDeadlineEndsTheTerm(t *testing.T) {
	store, clk, r := newFakeLeases(), testclock.NewFakeClock(t0), &recorder{}
	m := newTestManager(t, store, clk, "courier-0", r)
	m.step(context.Background())
	store.fail = errors.New("upstream unreachable")
	converge(clk, 4, m) // tries to renew at 6s and 8s, fails
	clk.SetTime(t0.Add(DefaultRenewDeadline - time.Nanosecond))
	if !m.Owns(0) {
		t.Fatal("dropped before the deadline")
	}
	clk.SetTime(t0.Add(DefaultRenewDeadline))
	if m.Owns(0) || len(m.Held()) != 0 {
		t.Fatal("still owns bucket 0 at its deadline")
	}
	m.step(context.Background())
	if len(r.lost) != 1 || !slices.Equal(r.lost[0], allBuckets()) {
		t.Errorf("OnChange lost %v, want every bucket once", r.lost)
	}
	if got := m.nextWake(); got != DefaultRetryPeriod {
		t.Errorf("nextWake = %s with nothing held", got)
	}
}

// TestLapsedRenewalIsGainedAgain: a membership renewal that lands only
// after the term ended by this replica's clock (a slow upstream) leaves
// Owns false in between, so delivery may have stopped; every held bucket
// is reported gained again so that its Clusters are passed over. A
// renewal in time reports nothing (the control).
func TestLapsedRenewalIsGainedAgain(t *testing.T) {
	store, clk, r := newFakeLeases(), testclock.NewFakeClock(t0), &recorder{}
	m := newTestManager(t, store, clk, "courier-0", r)
	m.step(context.Background())
	gainedAfter := func() []int {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []int
		for _, g := range r.gained[1:] {
			out = append(out, g...)
		}
		return out
	}
	advance(clk, DefaultRenewPeriod)
	m.step(context.Background())
	if g := gainedAfter(); len(g) != 0 {
		t.Fatalf("a renewal in time reported %v gained", g)
	}
	store.beforeUpdate = func(name string) {
		if name == MemberLeasePrefix+"courier-0" {
			store.beforeUpdate = nil
			clk.Step(DefaultRenewDeadline - DefaultRenewPeriod + time.Second) // the renewal lands a second after the term ended
		}
	}
	advance(clk, DefaultRenewPeriod)
	m.step(context.Background())
	if g := gainedAfter(); !slices.Equal(g, allBuckets()) {
		t.Errorf("renewed after the deadline; gained again: %v, want every bucket", g)
	}
	if !m.Owns(7) {
		t.Error("bucket 7 not owned after the late renewal")
	}
}

// TestFailedRenewalsRetryEveryRetryPeriod: the loop may wake often (to
// drop the buckets at the deadline), but a failed renewal is retried only
// once a retry period has passed, not at every wake.
func TestFailedRenewalsRetryEveryRetryPeriod(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	m := newTestManager(t, store, clk, "courier-0", nil)
	m.step(context.Background())
	store.fail = errors.New("upstream unreachable")
	advance(clk, DefaultRenewPeriod)
	before := store.updates
	m.renewMember(context.Background(), clk.Now())
	if got := store.updates - before; got != 1 {
		t.Fatalf("%d renewals tried when due, want 1", got)
	}
	advance(clk, DefaultRetryPeriod-time.Millisecond)
	m.renewMember(context.Background(), clk.Now())
	if got := store.updates - before; got != 1 {
		t.Errorf("retried within the retry period: %d tries", got)
	}
	advance(clk, time.Millisecond)
	m.renewMember(context.Background(), clk.Now())
	if got := store.updates - before; got != 2 {
		t.Errorf("%d tries after the retry period, want 2", got)
	}
}

// TestSuccessorWaitsAFullLeaseDuration: a holder stops (killed: no
// renewal, no release); the other replica takes its buckets only once it
// has seen its membership Lease unrenewed for a lease duration by its own
// clock, fences that Lease (no holder), and each take-over is a new term.
func TestSuccessorWaitsAFullLeaseDuration(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	a := newTestManager(t, store, clk, "courier-a", nil)
	b := newTestManager(t, store, clk, "courier-b", nil)
	converge(clk, 3, a, b)
	aBuckets := a.Held()
	if len(aBuckets) == 0 || len(b.Held()) == 0 {
		t.Fatalf("a holds %v, b %v", aBuckets, b.Held())
	}
	// a's last renewal was sent during the last round of converge: find
	// when b last saw a's membership Lease change.
	obs, _ := b.members.get(MemberLeasePrefix + "courier-a")
	lastSeen := obs.seenAt
	for clk.Now().Before(lastSeen.Add(DefaultLeaseDuration)) {
		b.step(context.Background())
		for _, bucket := range aBuckets {
			if b.Owns(bucket) {
				t.Fatalf("b took bucket %d at %s, %s after it last saw it renewed (lease %s)", bucket, clk.Now(), clk.Since(lastSeen), DefaultLeaseDuration)
			}
		}
		advance(clk, 500*time.Millisecond)
	}
	b.step(context.Background())
	if got := b.Held(); !slices.Equal(got, allBuckets()) {
		t.Fatalf("after expiry b holds %v, want all", got)
	}
	if term, _ := b.Term(aBuckets[0]); term.Holder != "courier-b" || term.Transitions < 1 {
		t.Errorf("taken-over term %+v, want holder courier-b and a new transition", term)
	}
	if h := store.holder(MemberLeasePrefix + "courier-a"); h != "" {
		t.Errorf("a's membership Lease names %q after the take-over, want it fenced", h)
	}
}

// TestOwnIdentityIsTakenBack: Leases naming this identity, left by a
// previous process that was killed without releasing them, are taken back
// at the first pass, each as a new term; another identity's unexpired
// Lease (the control) is still waited out.
func TestOwnIdentityIsTakenBack(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	old := newTestManager(t, store, clk, "courier-0", nil)
	old.step(context.Background())
	if len(old.Held()) != DefaultBuckets {
		t.Fatalf("first process holds %d buckets", len(old.Held()))
	}
	// Bucket 5 changes hands to a live replica before the crash: not ours.
	l, _ := store.Get(context.Background(), bucketLeaseName(5), metav1.GetOptions{})
	l.Spec.HolderIdentity = ptr.To("courier-1")
	if _, err := store.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	store.subs = nil // the old process is gone, killed: nothing released
	restarted := newTestManager(t, store, clk, "courier-0", nil)
	restarted.step(context.Background())
	held := restarted.Held()
	if len(held) != DefaultBuckets-1 || slices.Contains(held, 5) {
		t.Fatalf("restarted process holds %v, want every bucket but 5 (courier-1's, unexpired)", held)
	}
	if term, _ := restarted.Term(0); term.Holder != "courier-0" || term.Transitions != 1 {
		t.Errorf("bucket 0 term %+v, want courier-0 in a new term (transitions 1)", term)
	}
}

func TestShutdownReleasesEverything(t *testing.T) {
	store, clk, r := newFakeLeases(), testclock.NewFakeClock(t0), &recorder{}
	m := newTestManager(t, store, clk, "courier-0", r)
	m.step(context.Background())
	m.shutdown(context.Background())
	if len(r.lost) != 1 || len(r.lost[0]) != DefaultBuckets {
		t.Errorf("OnChange lost %v at shutdown, want all 64 once", r.lost)
	}
	for b := 0; b < DefaultBuckets; b++ {
		if h := store.holder(bucketLeaseName(b)); h != "" || m.Owns(b) {
			t.Errorf("bucket %d: holder %q after shutdown", b, h)
		}
	}
	if _, err := store.Get(context.Background(), MemberLeasePrefix+"courier-0", metav1.GetOptions{}); err == nil {
		t.Error("membership Lease not deleted")
	}
}

// TestShutdownReleasesAfterItsOwnLateRenewal: a write of the bucket Lease
// whose answer was cut off can still have been recorded, leaving the
// holder's copy one write behind; the release then conflicts, reads the Lease again and
// releases it while it still names this replica, and leaves it alone when
// another replica holds it.
func TestShutdownReleasesAfterItsOwnLateRenewal(t *testing.T) {
	for _, tc := range []struct {
		name, writer, wantHolder string
	}{
		{name: "its own renewal", writer: "courier-0", wantHolder: ""},
		{name: "taken by another", writer: "someone-else", wantHolder: "someone-else"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, clk, r := newFakeLeases(), testclock.NewFakeClock(t0), &recorder{}
			m := newTestManager(t, store, clk, "courier-0", r)
			m.step(context.Background())
			// The write the holder never heard back from.
			l, err := store.Get(context.Background(), bucketLeaseName(3), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l.Spec.HolderIdentity = ptr.To(tc.writer)
			l.Spec.RenewTime = &metav1.MicroTime{Time: clk.Now().Add(time.Second)}
			if _, err := store.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			m.shutdown(context.Background())
			if h := store.holder(bucketLeaseName(3)); h != tc.wantHolder {
				t.Errorf("bucket 3: holder %q after shutdown, want %q", h, tc.wantHolder)
			}
			if h := store.holder(bucketLeaseName(4)); h != "" {
				t.Errorf("bucket 4 (no late write): holder %q after shutdown", h)
			}
		})
	}
}

// TestUnownedMetric: buckets whose desired owner is alive but never
// takes them count as without owner once 2× the lease duration passed.
func TestUnownedMetric(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	m := newTestManager(t, store, clk, "courier-0", nil)
	ghostMembers := []string{"courier-0", "ghost"}
	want := 0
	for b := 0; b < DefaultBuckets; b++ {
		if DesiredOwner(b, ghostMembers) == "ghost" {
			want++
		}
	}
	renewGhost := func() {
		m.members.observe(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: MemberLeasePrefix + "ghost", ResourceVersion: fmt.Sprint(clk.Now().UnixNano()),
		}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("ghost")}})
	}
	unowned := func() float64 {
		v, _ := testutil.GetGaugeMetricValue(bucketsUnowned.WithLabelValues("courier-0"))
		return v
	}
	for clk.Since(t0) <= 2*DefaultLeaseDuration {
		renewGhost()
		m.step(context.Background())
		if v := unowned(); v != 0 {
			t.Fatalf("unowned = %v after %s, before 2× the lease duration", v, clk.Since(t0))
		}
		advance(clk, DefaultRetryPeriod)
	}
	renewGhost()
	m.step(context.Background())
	if v := unowned(); int(v) != want {
		t.Errorf("unowned = %v, want the ghost's %d buckets", v, want)
	}
	if len(m.Held()) != DefaultBuckets-want {
		t.Errorf("holds %d, want %d", len(m.Held()), DefaultBuckets-want)
	}
}

// TestAStrayLeaseIsReleased: a bucket Lease that names a live replica
// which does not hold it (its release failed, or its acquisition's answer
// was cut off although the write was recorded) is released by that
// replica, so the desired owner takes it well before any expiry; nobody
// else may take it while its holder lives.
func TestAStrayLeaseIsReleased(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	a := newTestManager(t, store, clk, "courier-a", nil)
	b := newTestManager(t, store, clk, "courier-b", nil)
	converge(clk, 3, a, b)
	members := []string{"courier-a", "courier-b"}
	stray := -1
	for x := 0; x < DefaultBuckets && stray < 0; x++ {
		if DesiredOwner(x, members) == "courier-b" && b.Owns(x) {
			stray = x
		}
	}
	if stray < 0 {
		t.Fatal("courier-b owns none of its buckets")
	}
	// The Lease names courier-a in a new term, as its recorded
	// acquisition would, but courier-a does not hold the bucket.
	l, _ := store.Get(context.Background(), bucketLeaseName(stray), metav1.GetOptions{})
	l.Spec.HolderIdentity = ptr.To("courier-a")
	l.Spec.LeaseTransitions = ptr.To(transitions(l) + 1)
	if _, err := store.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	converge(clk, 3, a, b)
	if a.Owns(stray) || !b.Owns(stray) || store.holder(bucketLeaseName(stray)) != "courier-b" {
		t.Fatalf("bucket %d: courier-a owns %v, courier-b owns %v, Lease names %q; want courier-b's again",
			stray, a.Owns(stray), b.Owns(stray), store.holder(bucketLeaseName(stray)))
	}
	if elapsed := clk.Since(start); elapsed >= DefaultLeaseDuration {
		t.Errorf("handed back after %s, not before expiry", elapsed)
	}
}
