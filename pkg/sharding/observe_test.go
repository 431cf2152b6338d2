package sharding

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func memberLease(id, rv string, seconds *int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeasePrefix + id, ResourceVersion: rv},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(id), LeaseDurationSeconds: seconds},
	}
}

// TestObserverJudgesByItsOwnClock: expiry counts from when this replica
// saw a Lease change, by the Lease's own duration (else the fallback); a
// resync of the same version does not renew it; renewTime, written by
// another clock, is ignored; a deletion (also as a tombstone) removes it.
func TestObserverJudgesByItsOwnClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		// events run at t0 + at, in order.
		events []func(o *observer, clk *testclock.FakeClock)
		at     time.Duration
		want   []string
	}{
		{name: "fresh", at: 14 * time.Second, want: []string{"a", "self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) { o.observe(memberLease("a", "1", nil)) },
			}},
		{name: "expired by the fallback", at: 15 * time.Second, want: []string{"self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) { o.observe(memberLease("a", "1", nil)) },
			}},
		{name: "the Lease's own duration", at: 5 * time.Second, want: []string{"self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) { o.observe(memberLease("a", "1", ptr.To[int32](5))) },
			}},
		{name: "a resync is no renewal", at: 16 * time.Second, want: []string{"self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) { o.observe(memberLease("a", "1", nil)) },
				func(o *observer, clk *testclock.FakeClock) {
					advance(clk, 10*time.Second)
					o.observe(memberLease("a", "1", nil))
				},
			}},
		{name: "a new version is", at: 16 * time.Second, want: []string{"a", "self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) { o.observe(memberLease("a", "1", nil)) },
				func(o *observer, clk *testclock.FakeClock) {
					advance(clk, 10*time.Second)
					o.observe(memberLease("a", "2", nil))
				},
			}},
		{name: "renewTime from another clock is ignored", at: 15 * time.Second, want: []string{"self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) {
					l := memberLease("a", "1", nil)
					l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(t0.Add(time.Hour)))
					o.observe(l)
				},
			}},
		{name: "released", at: 0, want: []string{"self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) {
					l := memberLease("a", "1", nil)
					l.Spec.HolderIdentity = nil
					o.observe(l)
				},
			}},
		{name: "deleted", at: 0, want: []string{"self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) { o.observe(memberLease("a", "1", nil)) },
				func(o *observer, _ *testclock.FakeClock) { o.handler().OnDelete(memberLease("a", "1", nil)) },
			}},
		{name: "deleted, seen as a tombstone", at: 0, want: []string{"self"},
			events: []func(*observer, *testclock.FakeClock){
				func(o *observer, _ *testclock.FakeClock) { o.handler().OnAdd(memberLease("a", "1", nil), true) },
				func(o *observer, _ *testclock.FakeClock) {
					o.handler().OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: memberLease("a", "1", nil)})
				},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(t0)
			o := newObserver(clk)
			for _, e := range tc.events {
				e(o, clk)
			}
			if got := o.live(t0.Add(tc.at), DefaultLeaseDuration, "self"); !slices.Equal(got, tc.want) {
				t.Errorf("live = %v, want %v", got, tc.want)
			}
		})
	}
}
