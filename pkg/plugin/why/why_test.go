package why

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// source is a hand-written load.Source over a few rows; ListRows applies
// the field selectors why sends.
type source struct {
	rows   []v1alpha1.DownstreamCopy
	events []corev1.Event
}

var _ load.Source = (*source)(nil)

func (s *source) ListSummaries(context.Context, string) ([]v1alpha1.DownstreamCopySummary, error) {
	return nil, nil
}
func (s *source) GetSummary(context.Context, string, string) (*v1alpha1.DownstreamCopySummary, error) {
	return nil, errors.New("not used")
}
func (s *source) WatchSummary(context.Context, string, string, string) (watch.Interface, error) {
	return nil, errors.New("not used")
}
func (s *source) ListRows(_ context.Context, ns string, sel fields.Selector) ([]v1alpha1.DownstreamCopy, error) {
	var out []v1alpha1.DownstreamCopy
	for _, r := range s.rows {
		set := fields.Set{"spec.owner.kind": string(r.Spec.Owner.Kind), "spec.owner.name": r.Spec.Owner.Name,
			"spec.cluster": r.Spec.Cluster, "spec.source.name": r.Spec.Source.Name}
		if r.Namespace == ns && sel.Matches(set) {
			out = append(out, r)
		}
	}
	return out, nil
}
func (s *source) GetRow(_ context.Context, ns, name string) (*v1alpha1.DownstreamCopy, error) {
	for i := range s.rows {
		if s.rows[i].Name == name && s.rows[i].Namespace == ns {
			return &s.rows[i], nil
		}
	}
	return nil, fmt.Errorf("downstreamcopies %q: %w", name, load.ErrNotFound)
}
func (s *source) RowCells(context.Context, string, string) (map[string]string, error) {
	return map[string]string{"delivered-by": "leader"}, nil
}
func (s *source) Events(context.Context, string, string, string) ([]corev1.Event, error) {
	return s.events, nil
}

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func row(cluster, kind, name string, phase v1alpha1.CopyPhase, srcRV, syncedRV, msg string) v1alpha1.DownstreamCopy {
	return v1alpha1.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Name: "example." + cluster + "." + strings.ToLower(kind) + "." + name, Namespace: "fleet-default"},
		Spec: v1alpha1.DownstreamCopySpec{Owner: v1alpha1.CopyOwner{Kind: "HelmOp", Name: "example"}, HelmOp: "example", Cluster: cluster,
			Source: v1alpha1.CopySource{Kind: kind, Name: name, ResourceVersion: srcRV}, Target: v1alpha1.CopyTarget{Namespace: "app", Name: name}},
		Status: v1alpha1.DownstreamCopyStatus{Phase: phase, SyncedResourceVersion: syncedRV, Message: msg},
	}
}

func fleetSource() *source {
	synced := row("downstream-1", "Secret", "example-credentials", "Synced", "12", "12", "Secret example-credentials copied")
	synced.Status.LastSyncTime = &metav1.Time{Time: now.Add(-3 * time.Minute)}
	return &source{
		rows: []v1alpha1.DownstreamCopy{
			synced,
			row("downstream-2", "Secret", "example-credentials", "Conflict", "12", "",
				"Secret app/example-credentials exists in cluster downstream-2 and is not managed by Courier; it is left unchanged"),
			row("downstream-2", "ConfigMap", "example-credentials", "Synced", "14", "11", ""),
			row("downstream-3", "Secret", "example-credentials", "Forbidden", "12", "",
				"cluster downstream-3: forbidden: ServiceAccount cattle-fleet-system/app may not create secrets in namespace app; nothing was written"),
		},
		events: []corev1.Event{
			{Type: "Normal", Reason: "Copied", Message: "Secret example-credentials copied to app/example-credentials in cluster downstream-1", LastTimestamp: metav1.Time{Time: now.Add(-3 * time.Minute)}},
			{Type: "Warning", Reason: "Conflict", Message: "Secret app/example-credentials exists in cluster downstream-2 and is not managed by Courier; it is left unchanged", LastTimestamp: metav1.Time{Time: now.Add(-2 * time.Minute)}},
		},
	}
}

func TestWhyGolden(t *testing.T) {
	src := fleetSource()
	example := load.Owner{Kind: "HelmOp", Name: "example"}
	for _, tc := range []struct {
		name string
		t    Target
	}{
		{"conflict", Target{Row: "example.downstream-2.secret.example-credentials"}},
		{"forbidden", Target{Owner: example, Cluster: "downstream-3", Source: "Secret/example-credentials"}},
		{"outofdate", Target{Owner: example, Cluster: "downstream-2", Source: "ConfigMap/example-credentials"}},
		{"synced", Target{Owner: example, Cluster: "downstream-1", Source: "example-credentials"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Gather(context.Background(), src, "fleet-default", tc.t)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := Render(&out, f, now); err != nil {
				t.Fatal(err)
			}
			fixtureGolden(t, "why-"+tc.name, out.String())
		})
	}
}

func TestWhyBadInput(t *testing.T) {
	src := fleetSource()
	example := load.Owner{Kind: "HelmOp", Name: "example"}
	for _, tc := range []struct {
		t    Target
		want string
	}{
		{Target{Row: "nope"}, `no downstreamcopy "nope" in namespace fleet-default`},
		{Target{Owner: example, Cluster: "downstream-9", Source: "example-credentials"}, `HelmOp "example" has no copy of example-credentials for Cluster downstream-9`},
		{Target{Owner: example, Cluster: "downstream-2", Source: "example-credentials"}, `"example-credentials" names 2 sources`},
	} {
		_, err := Gather(context.Background(), src, "fleet-default", tc.t)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.t, err, tc.want)
		}
	}
}
