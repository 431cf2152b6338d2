package copyview

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// gitRepoBundle is a Bundle as Fleet makes it from a GitRepo named repo:
// the fleet.yaml's targetCustomizations first, then the GitRepo's target,
// which is also the Bundle's one restriction.
func gitRepoBundle(name, repo string, root fleet.BundleDeploymentOptions, customizations ...fleet.BundleTarget) *fleet.Bundle {
	gitRepoTarget := fleet.BundleTarget{Name: "default", ClusterGroup: "default"}
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name,
			Labels: map[string]string{fleet.LabelRepoName: repo}},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: root,
			Targets:                 append(customizations, gitRepoTarget),
			TargetRestrictions:      []fleet.BundleTargetRestriction{{Name: "default", ClusterGroup: "default"}},
		},
	}
}

// A Bundle owns rows as a HelmOp does, named apart from those of a HelmOp
// of the same name; a Bundle made from a HelmOp owns none.
func TestBundleRows(t *testing.T) {
	app := gitRepoBundle("app", "repo", listing("Secret/creds"),
		fleet.BundleTarget{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
			BundleDeploymentOptions: listing("ConfigMap/settings")})
	fromHelmOp := gitRepoBundle("web", "", listing("Secret/creds"))
	fromHelmOp.Labels = map[string]string{fleet.LabelHelmOpName: "web"}
	f := newFixture(t, helmOp("app", listing("Secret/creds")), app, fromHelmOp,
		cluster("c1", map[string]string{"env": "dev"}), cluster("c2", nil), defaultGroup,
		source("Secret", "creds", "1"), source("ConfigMap", "settings", "2"))

	if got, want := f.engine.desiredOf(types.NamespacedName{Namespace: "fleet-default", Name: "bundle:app"}),
		[]string{RowName("bundle:app", "c1", "ConfigMap", "settings"), RowName("bundle:app", "c1", "Secret", "creds"), RowName("bundle:app", "c2", "Secret", "creds")}; !slices.Equal(got, want) {
		t.Errorf("Bundle app handed over %q, want %q", got, want)
	}
	if got := f.engine.desiredOf(types.NamespacedName{Namespace: "fleet-default", Name: "bundle:web"}); got != nil {
		t.Errorf("a Bundle made from a HelmOp was handed over: %q", got)
	}
	r := f.row(RowName("bundle:app", "c1", "Secret", "creds"))
	wantSpec := courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: "app"}
	if r.Spec.Owner != wantSpec || r.Spec.HelmOp != "" || r.Spec.GitRepo != "repo" || r.Labels[LabelBundle] != "app" || r.Labels[LabelHelmOp] != "" {
		t.Errorf("Bundle row: spec %+v labels %v", r.Spec, r.Labels)
	}
	h := f.row(RowName("app", "c1", "Secret", "creds"))
	if h.Name == r.Name || h.Spec.Owner.Kind != courier.OwnerKindHelmOp || h.Spec.HelmOp != "app" {
		t.Errorf("HelmOp row %s: spec %+v; Bundle row %s", h.Name, h.Spec, r.Name)
	}
	if len(f.rows()) != 5 {
		t.Errorf("rows: %d, want 5 (2 of the HelmOp, 3 of the Bundle)", len(f.rows()))
	}
}

// Events reach Bundles as they reach HelmOps: a listed source's new
// version queues both owners listing it; a Bundle's spec or ownership
// label queues it; a Cluster's labels queue every owner of its workspace.
func TestEventsQueueBundles(t *testing.T) {
	creds := source("Secret", "creds", "1")
	c1 := cluster("c1", map[string]string{"env": "dev"})
	app := gitRepoBundle("app", "repo", listing("Secret/creds"))
	objs := func() []any {
		return []any{helmOp("op", listing("Secret/creds")), app, c1, defaultGroup, creds}
	}
	cases := []struct {
		name  string
		event func(f *fixture)
		want  []string
	}{
		{name: "a listed Secret changed", event: func(f *fixture) { f.update(creds, withRV(creds, "5")) },
			want: []string{"update fleet-default/bundle:app 1", "update fleet-default/op 1"}},
		{name: "a Bundle's spec changed", event: func(f *fixture) {
			n := app.DeepCopy()
			n.Spec.DownstreamResources = append(n.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "ConfigMap", Name: "more"})
			f.update(app, n)
		}, want: []string{"set fleet-default/bundle:app 2"}},
		{name: "a Bundle's status-only change", event: func(f *fixture) {
			n := app.DeepCopy()
			n.Annotations = map[string]string{"x": "y"}
			f.update(app, n)
		}},
		{name: "a Bundle labelled as made from a HelmOp: its rows go", event: func(f *fixture) {
			n := app.DeepCopy()
			n.Labels[fleet.LabelHelmOpName] = "app"
			f.update(app, n)
		}, want: []string{"set fleet-default/bundle:app 0"}},
		{name: "a Bundle deleted", event: func(f *fixture) { f.remove(app) },
			want: []string{"set fleet-default/bundle:app 0"}},
		{name: "a Cluster's labels changed", event: func(f *fixture) {
			n := c1.DeepCopy()
			n.Labels["env"] = "prod"
			f.update(c1, n)
		}, want: []string{"set fleet-default/bundle:app 1", "set fleet-default/op 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, objs()...)
			f.engine.takeCalls()
			tc.event(f)
			f.drain()
			want := tc.want
			if want == nil {
				want = []string{}
			}
			if got := f.engine.takeCalls(); !slices.Equal(got, want) {
				t.Errorf("recomputed %q, want %q", got, want)
			}
		})
	}
}
