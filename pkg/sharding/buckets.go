package sharding

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// dropExpired forgets the buckets whose term ended by this replica's
// clock (no renewal succeeded within RenewDeadline) and returns them.
// Owns already says false for them; nothing is released: the Lease may
// be another's by now, and if not it expires on its own.
func (m *Manager) dropExpired(now time.Time) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lost []int
	for b, h := range m.held {
		if !now.Before(h.validUntil) {
			delete(m.held, b)
			lost = append(lost, b)
		}
	}
	return lost
}

// renewParallelism bounds the renewals in flight at once. One after the
// other, 64 renewals at 100 ms each (a busy upstream) took longer than the
// margin between RenewPeriod and RenewDeadline, so the last buckets'
// terms lapsed before their renewal landed.
const renewParallelism = 16

// renewResult is what renewDue found.
type renewResult struct {
	// lost are the buckets whose Lease someone else changed.
	lost []int
	// regained are the buckets renewed after their term had already ended
	// by this replica's clock: Owns was false in between, so a pass over
	// their Clusters may have only observed, and they must be treated as
	// gained again (OnChange) for those Clusters to be passed over again.
	regained []int
}

// renewDue renews every held bucket whose last renewal is RenewPeriod old
// (and whose last failed attempt, if any, is RetryPeriod old), up to
// renewParallelism at once. A conflict or a missing Lease means someone
// else changed it, so this replica's term is over at once (lost). Any
// other error keeps the bucket until its deadline, and a later pass
// retries; the failures of one pass are logged as one line.
func (m *Manager) renewDue(ctx context.Context, now time.Time) renewResult {
	var (
		mu      sync.Mutex
		res     renewResult
		failed  []int
		lastErr error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, renewParallelism)
	for b, l := range m.dueForRenewal(now) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			lost, regained, err := m.renew(ctx, b, l)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case lost:
				res.lost = append(res.lost, b)
			case regained:
				res.regained = append(res.regained, b)
			case err != nil:
				failed, lastErr = append(failed, b), err
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		sort.Ints(failed)
		klog.FromContext(ctx).Error(lastErr, "Cannot renew buckets; retrying until their deadlines", "buckets", failed)
	}
	return res
}

// renew renews bucket b's Lease l once.
func (m *Manager) renew(ctx context.Context, b int, l *coordinationv1.Lease) (lost, regained bool, _ error) {
	next := l.DeepCopy()
	sent := m.cfg.Clock.Now()
	next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(sent))
	got, err := m.write(ctx, next)
	switch {
	case err == nil:
		return false, m.hold(b, got, sent), nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		klog.FromContext(ctx).Info("Lost a bucket: its Lease changed under this replica", "bucket", b, "err", err)
		m.mu.Lock()
		delete(m.held, b)
		m.mu.Unlock()
		return true, false, nil
	default:
		m.mu.Lock()
		if h := m.held[b]; h != nil {
			h.triedAt = sent
		}
		m.mu.Unlock()
		return false, false, err
	}
}

// dueForRenewal returns the Leases of the held buckets to renew now.
func (m *Manager) dueForRenewal(now time.Time) map[int]*coordinationv1.Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	due := map[int]*coordinationv1.Lease{}
	for b, h := range m.held {
		if !now.Before(h.renewedAt.Add(m.cfg.RenewPeriod)) && !now.Before(h.triedAt.Add(m.cfg.RetryPeriod)) {
			due[b] = h.lease
		}
	}
	return due
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

// release clears holderIdentity of a Lease this replica held, on the
// condition that nobody wrote it since (resourceVersion), so that the
// desired owner may take it at once instead of after expiry. Delivery for
// it must have stopped already. A failed release is only logged: the
// Lease then expires.
//
// A conflict can be this replica's own renewal: one whose answer a
// shutdown cut off (context canceled) may still have been recorded, and
// the copy held is then one write behind. The Lease is read again and, if
// it still names this replica, released from that read: no one else
// writes a Lease that names another holder. Seen in test/sharding's
// TestHandOver on a loaded machine: 8 of a stopping replica's 23 buckets
// moved only when their Leases expired, 6 s later.
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
		klog.FromContext(ctx).Info("Could not release a bucket; it expires instead", "lease", l.Name, "err", err)
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
func (m *Manager) acquireDesired(ctx context.Context, now time.Time, members []string) []int {
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
// it: missing (created), released (no holder), not seen renewed for its
// duration, or naming this replica's own identity. The last is a term
// this process let lapse, or one its previous process left when it was
// killed: identities are unique among live replicas (the Pod name), and a
// container is restarted only once its previous process is gone, so no
// other writer can hold that term. client-go's leader election takes back
// a Lease naming its identity the same way; waiting it out instead kept a
// restarted replica from delivering for a whole lease. The update carries
// the observed resourceVersion, so a renewal this replica has not seen
// yet wins.
func (m *Manager) acquire(ctx context.Context, now time.Time, b int) bool {
	name := bucketLeaseName(b)
	obs, seen := m.buckets.get(name)
	var next *coordinationv1.Lease
	if seen {
		if h := obs.holder(); h != "" && h != m.cfg.Identity && !obs.expired(now, m.cfg.LeaseDuration) {
			return false
		}
		next = obs.lease.DeepCopy()
		next.Spec.LeaseTransitions = ptr.To(ptr.Deref(next.Spec.LeaseTransitions, 0) + 1)
	} else {
		next = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: m.cfg.Namespace, Labels: map[string]string{BucketLabel: "true"},
		}}
		next.Spec.LeaseTransitions = ptr.To[int32](0)
	}
	sent := m.cfg.Clock.Now()
	next.Spec.HolderIdentity = ptr.To(m.cfg.Identity)
	next.Spec.LeaseDurationSeconds = ptr.To(int32(m.cfg.LeaseDuration / time.Second))
	next.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(sent))
	next.Spec.RenewTime = next.Spec.AcquireTime
	got, err := m.write(ctx, next)
	if err != nil {
		// Conflicts and AlreadyExists are races with another replica, or
		// an observation not yet up to date: the next pass looks again.
		klog.FromContext(ctx).V(4).Info("Could not acquire a bucket", "bucket", b, "err", err)
		return false
	}
	m.hold(b, got, sent)
	klog.FromContext(ctx).V(2).Info("Acquired a bucket", "bucket", b, "transitions", ptr.Deref(got.Spec.LeaseTransitions, 0))
	return true
}

// write creates l when it has no resourceVersion yet, else updates it with
// its resourceVersion as precondition, bounded by RetryPeriod so that one
// slow request cannot hold up the other buckets' renewals for long.
func (m *Manager) write(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RetryPeriod)
	defer cancel()
	if l.ResourceVersion == "" {
		return m.leases.Create(ctx, l, metav1.CreateOptions{})
	}
	return m.leases.Update(ctx, l, metav1.UpdateOptions{})
}

// hold records a successful acquisition or renewal sent at sent: the term
// lasts RenewDeadline from when the request left, not from when it was
// answered, because the server may have recorded it (and others observed
// it) any time in between. It reports whether the bucket was held before
// and its term had ended by now: Owns was false until this hold.
func (m *Manager) hold(b int, l *coordinationv1.Lease, sent time.Time) (lapsed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.held[b]
	m.held[b] = &heldBucket{lease: l, renewedAt: sent, validUntil: sent.Add(m.cfg.RenewDeadline)}
	return prev != nil && !m.cfg.Clock.Now().Before(prev.validUntil)
}

// holds reports whether b is in the held set (valid or not yet dropped).
func (m *Manager) holds(b int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[b] != nil
}

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
