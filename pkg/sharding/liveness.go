package sharding

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// A bucket Lease names its holder and term and is written only when the
// bucket changes hands; the holder's liveness is its membership Lease,
// the one Lease a replica renews. So a replica at rest writes one Lease
// per RenewPeriod whatever the number of buckets. docs/scale-out.md
// ("Why never two writers") gives the whole argument; in short, a holder
// h is gone, and its buckets free, when this replica has seen the bucket
// Lease unchanged for LeaseDuration and one of:
//
//   - h's membership Lease names no holder: it was fenced (below) or
//     released, after every renewal h made in that term;
//   - h's membership Lease has not changed for its duration by this
//     replica's clock, and this replica fences it: an update clearing its
//     holder with the observed resourceVersion as precondition. The update
//     succeeds only if h wrote nothing since this replica saw it, so h's
//     last renewal is the one observed at least LeaseDuration ago, and
//     h's term (RenewDeadline after it sent that renewal) is over; any
//     later renewal of h's conflicts, and h then drops every bucket;
//   - h's membership Lease is missing, has been seen missing for
//     LeaseDuration, and a read from storage confirms it.

// holderGone reports whether bucket Lease obs, naming holder h (another
// replica), may be claimed now. It may fence h's membership Lease.
func (m *Manager) holderGone(ctx context.Context, now time.Time, obs observation, h string) bool {
	if !obs.staleFor(now, m.cfg.LeaseDuration) {
		return false // taken recently, or by a replica renewing bucket Leases
	}
	name := MemberLeasePrefix + h
	mem, ok := m.members.get(name)
	if !ok {
		return m.memberAbsent(ctx, now, name)
	}
	delete(m.absentSince, name)
	if mem.holder() != h {
		return true
	}
	if !mem.expired(now, m.cfg.LeaseDuration) {
		return false
	}
	return m.fence(ctx, mem.lease)
}

// memberAbsent reports whether the membership Lease name, which this
// replica does not see, has been missing for LeaseDuration by its clock,
// as a read from storage confirms: a Lease this replica's watch has not
// delivered yet is found then, and judged as any other from now on.
func (m *Manager) memberAbsent(ctx context.Context, now time.Time, name string) bool {
	since, ok := m.absentSince[name]
	if !ok {
		m.absentSince[name] = now
		return false
	}
	if now.Before(since.Add(m.cfg.LeaseDuration)) {
		return false
	}
	got, err := m.leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		klog.FromContext(ctx).V(2).Info("Cannot read a bucket holder's membership Lease", "lease", name, "err", err)
		return false
	}
	delete(m.absentSince, name)
	m.members.observe(got)
	return false
}

// fence clears holderIdentity of another replica's membership Lease l,
// observed unchanged for its duration, on the condition that it is still
// the version observed. It reports whether it did; on a conflict the
// holder renewed after all, and the Lease is read again to observe it.
func (m *Manager) fence(ctx context.Context, l *coordinationv1.Lease) bool {
	next := l.DeepCopy()
	next.Spec.HolderIdentity = nil
	got, err := m.write(ctx, next)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not fence a replica seen gone", "lease", l.Name, "err", err)
		if cur, err := m.leases.Get(ctx, l.Name, metav1.GetOptions{}); err == nil {
			m.members.observe(cur)
		}
		return false
	}
	m.members.observe(got)
	klog.FromContext(ctx).Info("Fenced a replica whose membership Lease expired; taking over its buckets", "lease", l.Name)
	return true
}

// otherHolder is the holder bucket b's Lease names while, as this
// replica sees it, that holder is not gone: the Lease changed within
// LeaseDuration, or the holder's membership Lease names it and has not
// expired. "" when the Lease names nobody or the holder is gone. It
// writes nothing and is for display and metrics; claims use holderGone.
func (m *Manager) otherHolder(now time.Time, b int) string {
	obs, ok := m.buckets.get(bucketLeaseName(b))
	if !ok {
		return ""
	}
	h := obs.holder()
	if h == "" || !obs.staleFor(now, m.cfg.LeaseDuration) {
		return h
	}
	if mem, ok := m.members.get(MemberLeasePrefix + h); ok && mem.holder() == h && !mem.expired(now, m.cfg.LeaseDuration) {
		return h
	}
	return ""
}
