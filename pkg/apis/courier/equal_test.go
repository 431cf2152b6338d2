package courier

import (
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EqualIgnoringServerFields answers as apimachinery's semantic equality
// does once the server's fields are cleared, for a change to every field
// a row has, and false (never a wrong true) for metadata rows do not use.
func TestEqualIgnoringServerFields(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	base := func() *DownstreamCopy {
		return &DownstreamCopy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "app.c1.secret.db", UID: "u1", ResourceVersion: "7",
				CreationTimestamp: at, Labels: map[string]string{"a": "b"}},
			Spec: DownstreamCopySpec{HelmOp: "app", Cluster: "c1", Source: CopySource{Kind: "Secret", Name: "db", ResourceVersion: "3"},
				Target: CopyTarget{Namespace: "apps", Name: "db"}, ServiceAccount: "sa", KeepResources: true},
			Status: DownstreamCopyStatus{Phase: CopyPhaseSynced, SyncedResourceVersion: "3", LastSyncTime: &at, Message: "ok",
				Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "Synced", Message: "ok"}}},
		}
	}
	later := metav1.NewTime(at.Add(time.Second))
	cases := []struct {
		name   string
		change func(*DownstreamCopy)
		want   bool
	}{
		{"identical", func(*DownstreamCopy) {}, true},
		{"server fields only", func(r *DownstreamCopy) { r.UID, r.ResourceVersion, r.CreationTimestamp = "u2", "8", later }, true},
		{"same instant, other location", func(r *DownstreamCopy) {
			l := metav1.NewTime(at.In(time.FixedZone("x", 3600)))
			r.Status.LastSyncTime = &l
		}, true},
		{"nil and empty labels", func(r *DownstreamCopy) { r.Labels = map[string]string{"a": "b"}; r.Annotations = map[string]string{} }, true},
		{"name", func(r *DownstreamCopy) { r.Name = "other" }, false},
		{"namespace", func(r *DownstreamCopy) { r.Namespace = "other" }, false},
		{"label value", func(r *DownstreamCopy) { r.Labels["a"] = "c" }, false},
		{"annotation", func(r *DownstreamCopy) { r.Annotations = map[string]string{"k": "v"} }, false},
		{"spec helmOp", func(r *DownstreamCopy) { r.Spec.HelmOp = "x" }, false},
		{"spec source resourceVersion", func(r *DownstreamCopy) { r.Spec.Source.ResourceVersion = "4" }, false},
		{"spec target", func(r *DownstreamCopy) { r.Spec.Target.Namespace = "x" }, false},
		{"spec keep", func(r *DownstreamCopy) { r.Spec.KeepResources = false }, false},
		{"phase", func(r *DownstreamCopy) { r.Status.Phase = CopyPhasePending }, false},
		{"synced resourceVersion", func(r *DownstreamCopy) { r.Status.SyncedResourceVersion = "2" }, false},
		{"message", func(r *DownstreamCopy) { r.Status.Message = "x" }, false},
		{"last sync time", func(r *DownstreamCopy) { r.Status.LastSyncTime = &later }, false},
		{"last sync time nil", func(r *DownstreamCopy) { r.Status.LastSyncTime = nil }, false},
		{"condition status", func(r *DownstreamCopy) { r.Status.Conditions[0].Status = metav1.ConditionFalse }, false},
		{"condition time", func(r *DownstreamCopy) { r.Status.Conditions[0].LastTransitionTime = later }, false},
		{"condition added", func(r *DownstreamCopy) {
			r.Status.Conditions = append(r.Status.Conditions, metav1.Condition{Type: "X"})
		}, false},
		{"kind", func(r *DownstreamCopy) { r.Kind = "DownstreamCopy" }, false},
		// Fields rows never use: never equal, even when the same on both.
		{"owner reference", func(r *DownstreamCopy) { r.OwnerReferences = []metav1.OwnerReference{{UID: types.UID("x")}} }, false},
		{"finalizer", func(r *DownstreamCopy) { r.Finalizers = []string{"x"} }, false},
		{"generation", func(r *DownstreamCopy) { r.Generation = 1 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.change(b)
			if got := a.EqualIgnoringServerFields(b); got != tc.want {
				t.Errorf("EqualIgnoringServerFields = %t, want %t", got, tc.want)
			}
			if got := b.EqualIgnoringServerFields(a); got != tc.want {
				t.Errorf("reversed: %t, want %t", got, tc.want)
			}
			// Where it says equal, reflection agrees once the server's
			// fields are cleared.
			if tc.want {
				a2, b2 := a.DeepCopy(), b.DeepCopy()
				for _, r := range []*DownstreamCopy{a2, b2} {
					r.UID, r.ResourceVersion, r.CreationTimestamp = "", "", metav1.Time{}
				}
				if !apiequality.Semantic.DeepEqual(a2, b2) {
					t.Error("semantic equality disagrees")
				}
			}
		})
	}
	if (*DownstreamCopy)(nil).EqualIgnoringServerFields(base()) {
		t.Error("nil equals a row")
	}
}
