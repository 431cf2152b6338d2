package sharding

import (
	"context"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// bucketLeaseSeconds is the leaseDurationSeconds written on a bucket
// Lease: ten years. A bucket Lease is written on hand-over only, never
// renewed (its holder's liveness is its membership Lease), so it does not
// expire by itself. Replicas of the earlier protocol, which renewed
// bucket Leases and took one over once it went unrenewed for its own
// duration, thus never take a bucket from a live holder of this one
// during a rolling update: they wait for its release.
const bucketLeaseSeconds = 10 * 365 * 24 * 60 * 60

// dropExpired forgets every held bucket once this replica's term ended by
// its clock (no membership renewal succeeded within RenewDeadline) and
// returns them. Owns already says false for them; nothing is released:
// a bucket may be another's by now, and if not its holder is seen gone.
func (m *Manager) dropExpired(now time.Time) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Before(m.validUntil) {
		return nil
	}
	return m.dropAllLocked()
}

// dropTaken forgets the held buckets whose Lease, as observed, names
// another holder in a later term. The protocol never takes a bucket from
// a holder whose term runs; this catches a Lease written by hand, so that
// no write follows a term that is over.
func (m *Manager) dropTaken() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lost []int
	for b, h := range m.held {
		obs, ok := m.buckets.get(bucketLeaseName(b))
		if ok && obs.holder() != m.cfg.Identity && transitions(obs.lease) > transitions(h.lease) {
			delete(m.held, b)
			lost = append(lost, b)
		}
	}
	return lost
}

// undesired removes from the held buckets those another live member
// should hold, so Owns turns false for them now, and returns their Leases
// to release once delivery has stopped.
func (m *Manager) undesired(members []string) []*coordinationv1.Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*coordinationv1.Lease
	for b, h := range m.held {
		if DesiredOwner(b, members) != m.cfg.Identity {
			delete(m.held, b)
			out = append(out, h.lease)
		}
	}
	return out
}

// strays returns the bucket Leases that name this replica, that it does
// not hold and is not the desired owner of, and that it has seen
// unchanged for a RetryPeriod: a release that failed (its bucket was
// dropped from the held ones before the write), or an acquisition whose
// answer was cut off but which was recorded. While this replica lives
// nobody else takes such a Lease (its holder is not gone), so it
// releases it itself; it delivers nothing for it (Owns is false).
func (m *Manager) strays(now time.Time, members []string) []*coordinationv1.Lease {
	var out []*coordinationv1.Lease
	for b := 0; b < m.cfg.Buckets; b++ {
		if m.holds(b) || DesiredOwner(b, members) == m.cfg.Identity {
			continue
		}
		obs, ok := m.buckets.get(bucketLeaseName(b))
		if ok && obs.holder() == m.cfg.Identity && obs.staleFor(now, m.cfg.RetryPeriod) {
			out = append(out, obs.lease)
		}
	}
	return out
}

// release clears holderIdentity of a Lease this replica held, on the
// condition that nobody wrote it since (resourceVersion), so that the
// desired owner may take it at once. Delivery for it must have stopped
// already. A failed release is only logged: the bucket then moves once
// this replica is seen gone, or at a later pass (strays).
//
// A conflict can be this replica's own write: an acquisition whose answer
// was cut off may still have been recorded, and the copy held is then one
// write behind. The Lease is read again and, if it still names this
// replica, released from that read: no one else writes a Lease that names
// another live holder.
func (m *Manager) release(ctx context.Context, l *coordinationv1.Lease) {
	_, err := m.write(ctx, withoutHolder(l))
	if apierrors.IsConflict(err) {
		var cur *coordinationv1.Lease
		if cur, err = m.leases.Get(ctx, l.Name, metav1.GetOptions{}); err == nil {
			if h := cur.Spec.HolderIdentity; h == nil || *h != m.cfg.Identity {
				klog.FromContext(ctx).V(2).Info("A bucket to release was taken meanwhile", "lease", l.Name)
				return
			}
			_, err = m.write(ctx, withoutHolder(cur))
		}
	}
	if err != nil {
		klog.FromContext(ctx).Info("Could not release a bucket; it moves once this replica is seen gone", "lease", l.Name, "err", err)
		return
	}
	klog.FromContext(ctx).V(2).Info("Released a bucket", "lease", l.Name)
}

// withoutHolder is a copy of l that names no holder.
func withoutHolder(l *coordinationv1.Lease) *coordinationv1.Lease {
	next := l.DeepCopy()
	next.Spec.HolderIdentity = nil
	return next
}

// acquireDesired takes every bucket this replica is the desired owner of
// and does not hold yet, when its Lease is free, and returns those gained.
// It takes nothing while this replica's own term is not running (no
// membership Lease written, or its deadline passed): a bucket gained then
// could not be delivered anyway.
func (m *Manager) acquireDesired(ctx context.Context, now time.Time, members []string) []int {
	if !m.termRunning(now) {
		return nil
	}
	var gained []int
	for b := 0; b < m.cfg.Buckets; b++ {
		if DesiredOwner(b, members) != m.cfg.Identity || m.holds(b) {
			continue
		}
		if m.acquire(ctx, now, b) {
			gained = append(gained, b)
		}
	}
	return gained
}

// acquire takes bucket b's Lease if it is free as this replica observes
// it: missing (created), released (no holder), naming a holder that is
// gone (holderGone), or naming this replica's own identity. The last is a
// term this process let lapse, or one its previous process left when it
// was killed: identities are unique among live replicas (the Pod name),
// and a container is restarted only once its previous process is gone,
// so no other writer can hold that term. The update carries the observed
// resourceVersion and increments leaseTransitions: of two replicas
// claiming one bucket at once, one wins, and each hand-over is a new term.
func (m *Manager) acquire(ctx context.Context, now time.Time, b int) bool {
	name := bucketLeaseName(b)
	obs, seen := m.buckets.get(name)
	var next *coordinationv1.Lease
	if seen {
		if h := obs.holder(); h != "" && h != m.cfg.Identity && !m.holderGone(ctx, now, obs, h) {
			return false
		}
		next = obs.lease.DeepCopy()
		next.Spec.LeaseTransitions = ptr.To(transitions(next) + 1)
	} else {
		next = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: m.cfg.Namespace, Labels: map[string]string{BucketLabel: "true"},
		}}
		next.Spec.LeaseTransitions = ptr.To[int32](0)
	}
	next.Spec.HolderIdentity = ptr.To(m.cfg.Identity)
	next.Spec.LeaseDurationSeconds = ptr.To[int32](bucketLeaseSeconds)
	next.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(m.cfg.Clock.Now()))
	next.Spec.RenewTime = next.Spec.AcquireTime
	got, err := m.write(ctx, next)
	if err != nil {
		// Conflicts and AlreadyExists are races with another replica, or
		// an observation not yet up to date: the next pass looks again.
		klog.FromContext(ctx).V(4).Info("Could not acquire a bucket", "bucket", b, "err", err)
		return false
	}
	m.mu.Lock()
	m.held[b] = &heldBucket{lease: got}
	m.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Acquired a bucket", "bucket", b, "transitions", transitions(got))
	return true
}

// write creates l when it has no resourceVersion yet, else updates it with
// its resourceVersion as precondition, bounded by RetryPeriod so that one
// slow request cannot hold up the loop for long.
func (m *Manager) write(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RetryPeriod)
	defer cancel()
	if l.ResourceVersion == "" {
		return m.leases.Create(ctx, l, metav1.CreateOptions{})
	}
	return m.leases.Update(ctx, l, metav1.UpdateOptions{})
}

// holds reports whether b is in the held set (valid or not yet dropped).
func (m *Manager) holds(b int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[b] != nil
}

// transitions is l's leaseTransitions, 0 when unset.
func transitions(l *coordinationv1.Lease) int32 { return ptr.Deref(l.Spec.LeaseTransitions, 0) }

// bucketsOf returns the bucket numbers of bucket Leases.
func bucketsOf(leases []*coordinationv1.Lease) []int {
	out := make([]int, 0, len(leases))
	for _, l := range leases {
		if n, err := strconv.Atoi(strings.TrimPrefix(l.Name, BucketLeasePrefix)); err == nil {
			out = append(out, n)
		}
	}
	return out
}
