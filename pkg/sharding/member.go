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

// renewMember keeps this replica's membership Lease renewed every
// RenewPeriod, creating it (or taking over a leftover of a previous
// process with the same identity) the first time. A failure is retried at
// the next pass; once others have not seen it renewed for LeaseDuration
// they stop counting this replica and, after the bucket Leases expire,
// take its buckets.
func (m *Manager) renewMember(ctx context.Context, now time.Time) {
	if m.member != nil && now.Before(m.memberRenewedAt.Add(m.cfg.RenewPeriod)) {
		return
	}
	next := m.member
	if next == nil {
		got, err := m.leases.Get(ctx, m.memberLeaseName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			next = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name: m.memberLeaseName(), Namespace: m.cfg.Namespace, Labels: map[string]string{MemberLabel: "true"},
			}}
		case err != nil:
			klog.FromContext(ctx).Error(err, "Cannot read this replica's membership Lease")
			return
		default:
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
		// A conflict means our copy is stale: read it afresh next time.
		m.member = nil
		klog.FromContext(ctx).Error(err, "Cannot renew this replica's membership Lease")
		return
	}
	m.member, m.memberRenewedAt = got, sent
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
