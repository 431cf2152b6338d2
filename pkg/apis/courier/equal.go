package courier

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EqualIgnoringServerFields reports whether c and o hold the same row,
// apart from the fields the row store assigns (resourceVersion,
// creationTimestamp, uid). It is what apimachinery's semantic equality
// would answer, written out for the fields rows use: the store compares
// every row a change recomputes with the one it holds, and at 10,000 rows
// the reflective comparison was a tenth of Courier's CPU. Metadata rows do
// not use (owner references, finalizers, managed fields, deletion, a
// generated name or a generation) makes it answer false whenever either
// row has any: the store then writes the row, which is never wrong.
func (c *DownstreamCopy) EqualIgnoringServerFields(o *DownstreamCopy) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.TypeMeta == o.TypeMeta && plainMeta(&c.ObjectMeta) && plainMeta(&o.ObjectMeta) &&
		c.Name == o.Name && c.Namespace == o.Namespace &&
		maps.Equal(c.Labels, o.Labels) && maps.Equal(c.Annotations, o.Annotations) &&
		c.Spec == o.Spec && c.Status.equal(&o.Status)
}

// plainMeta reports whether m uses none of the metadata fields rows leave
// empty.
func plainMeta(m *metav1.ObjectMeta) bool {
	return m.GenerateName == "" && m.Generation == 0 && m.DeletionTimestamp == nil && m.DeletionGracePeriodSeconds == nil &&
		len(m.OwnerReferences) == 0 && len(m.Finalizers) == 0 && len(m.ManagedFields) == 0
}

func (s *DownstreamCopyStatus) equal(o *DownstreamCopyStatus) bool {
	if s.Phase != o.Phase || s.SyncedResourceVersion != o.SyncedResourceVersion || s.Message != o.Message ||
		!timesEqual(s.LastSyncTime, o.LastSyncTime) || len(s.Conditions) != len(o.Conditions) {
		return false
	}
	for i := range s.Conditions {
		a, b := &s.Conditions[i], &o.Conditions[i]
		if a.Type != b.Type || a.Status != b.Status || a.ObservedGeneration != b.ObservedGeneration ||
			a.Reason != b.Reason || a.Message != b.Message || !a.LastTransitionTime.Equal(&b.LastTransitionTime) {
			return false
		}
	}
	return true
}

// timesEqual is metav1.Time's semantic equality for optional times: both
// nil, or the same instant.
func timesEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}
