package sharding

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// memberResult is what renewMember found.
type memberResult struct {
	// lost are the buckets dropped because this replica's membership Lease
	// was found fenced (no holder) or missing: another replica judged it
	// gone, and its term is over.
	lost []int
	// regained are the buckets held when a renewal landed after the
	// term's deadline by this replica's clock: Owns was false in between,
	// so a pass over their Clusters may have only observed, and they must
	// be treated as gained again (OnChange) for those Clusters to be
	// passed over again.
	regained []int
}

// renewMember renews this replica's membership Lease once RenewPeriod
// passed since the last success (and RetryPeriod since the last failure):
// the one write that keeps every held bucket's term running. The first
// time, and after a conflict, it reads the Lease: one that names no
// holder was fenced by a replica that judged this one gone, and one that
// is missing was deleted; either way every held bucket is dropped
// before the Lease is written again, and buckets are then taken anew,
// each as a new term. A Lease naming this identity is taken up as it is:
// a previous process's (identities are unique among live replicas) or
// this one's own write whose answer was lost.
func (m *Manager) renewMember(ctx context.Context, now time.Time) (res memberResult) {
	if m.member != nil && now.Before(m.memberRenewedAt().Add(m.cfg.RenewPeriod)) ||
		now.Before(m.memberTriedAt.Add(m.cfg.RetryPeriod)) {
		return res
	}
	next := m.member
	if next == nil {
		got, err := m.leases.Get(ctx, m.memberLeaseName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			res.lost = m.dropAll()
			next = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name: m.memberLeaseName(), Namespace: m.cfg.Namespace, Labels: map[string]string{MemberLabel: "true"},
			}}
		case err != nil:
			m.memberTriedAt = now
			klog.FromContext(ctx).Error(err, "Cannot read this replica's membership Lease")
			return res
		default:
			if h := got.Spec.HolderIdentity; h == nil || *h != m.cfg.Identity {
				res.lost = m.dropAll()
			}
			next = got
		}
	}
	next = next.DeepCopy()
	sent := m.cfg.Clock.Now()
	next.Spec.HolderIdentity = ptr.To(m.cfg.Identity)
	next.Spec.LeaseDurationSeconds = ptr.To(int32(m.cfg.LeaseDuration / time.Second))
	next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(sent))
	if next.Spec.AcquireTime == nil || m.member == nil {
		next.Spec.AcquireTime = next.Spec.RenewTime
	}
	got, err := m.write(ctx, next)
	if err != nil {
		// A conflict or a missing Lease: read it afresh next time, to see
		// whether it was fenced.
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			m.member = nil
		}
		m.memberTriedAt = sent
		klog.FromContext(ctx).Error(err, "Cannot renew this replica's membership Lease")
		return res
	}
	m.member, m.memberTriedAt = got, time.Time{}
	res.regained = m.renewed(sent)
	return res
}

// renewed records a successful membership write sent at sent: the term
// lasts RenewDeadline from when the request left, not from when it was
// answered, because the server may have recorded it (and others observed
// it) any time in between. It returns the held buckets if the term had
// ended by now (a slow write): Owns was false until this renewal.
func (m *Manager) renewed(sent time.Time) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	lapsed := !m.cfg.Clock.Now().Before(m.validUntil)
	m.renewedAt, m.validUntil = sent, sent.Add(m.cfg.RenewDeadline)
	if !lapsed {
		return nil
	}
	var out []int
	for b := range m.held {
		out = append(out, b)
	}
	return out
}

// memberRenewedAt is when the last successful membership write was sent.
func (m *Manager) memberRenewedAt() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewedAt
}

// termRunning says whether this replica's membership Lease is written
// and its term has not ended by now.
func (m *Manager) termRunning(now time.Time) bool {
	if m.member == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return now.Before(m.validUntil)
}

// dropAll forgets every held bucket and ends the term, and returns the
// buckets.
func (m *Manager) dropAll() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropAllLocked()
}

func (m *Manager) dropAllLocked() []int {
	var lost []int
	for b := range m.held {
		lost = append(lost, b)
	}
	clear(m.held)
	m.validUntil = time.Time{}
	return lost
}

// deleteMember deletes the membership Lease on a clean shutdown, so that
// the others count this replica gone at once rather than after expiry.
func (m *Manager) deleteMember(ctx context.Context) {
	err := m.leases.Delete(ctx, m.memberLeaseName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Cannot delete this replica's membership Lease; it expires instead")
	}
	m.member = nil
}

func (m *Manager) memberLeaseName() string { return MemberLeasePrefix + m.cfg.Identity }
