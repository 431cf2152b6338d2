package e2e

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// TestTargeting changes Cluster labels, ClusterGroups and HelmOp targets and
// checks that rows appear and disappear as Fleet's targeting rules say.
func TestTargeting(t *testing.T) {
	w := newWorkspace(t, "ws-targeting", map[string]string{"env": "dev"}, map[string]string{"env": "prod"})
	all := metav1.ListOptions{}
	root := fleet.BundleDeploymentOptions{TargetNamespace: "apps", DownstreamResources: resources("Secret/creds")}

	// No targets means the default ClusterGroup, which does not exist yet.
	w.apply(helmOp("app", root))
	w.waitRows(all)
	w.apply(selectAll("default"))
	w.waitRows(all, "c1/Secret/creds@apps=SourceMissing", "c2/Secret/creds@apps=SourceMissing")

	steps := []struct {
		name    string
		targets []fleet.BundleTarget
		want    []string
	}{
		{
			name:    "clusterName",
			targets: []fleet.BundleTarget{{ClusterName: "c1"}},
			want:    []string{"c1/Secret/creds@apps=SourceMissing"},
		},
		{
			name:    "clusterSelector",
			targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}},
			want:    []string{"c2/Secret/creds@apps=SourceMissing"},
		},
		{
			name:    "clusterGroup",
			targets: []fleet.BundleTarget{{ClusterGroup: "dev"}},
			want:    []string{"c1/Secret/creds@apps=SourceMissing"},
		},
		{
			name:    "clusterGroupSelector",
			targets: []fleet.BundleTarget{{ClusterGroupSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "production"}}}},
			want:    []string{"c2/Secret/creds@apps=SourceMissing"},
		},
		{
			name: "per-target downstreamResources and namespace only for that target",
			targets: []fleet.BundleTarget{
				{ClusterName: "c1", BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "c1-apps", DownstreamResources: resources("ConfigMap/extra", "secret/creds")}},
				{ClusterGroup: "default"},
			},
			want: []string{"c1/ConfigMap/extra@c1-apps=SourceMissing", "c1/Secret/creds@c1-apps=SourceMissing", "c2/Secret/creds@apps=SourceMissing"},
		},
		{
			name: "doNotDeploy excludes the cluster its target matches first",
			targets: []fleet.BundleTarget{
				{ClusterName: "c1", DoNotDeploy: true},
				{ClusterGroup: "default"},
			},
			want: []string{"c2/Secret/creds@apps=SourceMissing"},
		},
		{
			name:    "a target with no criteria matches nothing",
			targets: []fleet.BundleTarget{{Name: "nothing"}},
		},
		{
			name: "no targets again: the default group",
			want: []string{"c1/Secret/creds@apps=SourceMissing", "c2/Secret/creds@apps=SourceMissing"},
		},
	}
	w.apply(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "dev"},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}})
	w.apply(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"tier": "production"}},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}})
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			w.t = t
			w.apply(helmOp("app", root, s.targets...))
			w.waitRows(all, s.want...)
		})
	}

	t.Run("cluster labels and groups change", func(t *testing.T) {
		w.t = t
		w.apply(helmOp("app", root, fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}))
		w.waitRows(all, "c2/Secret/creds@apps=SourceMissing")
		// Relabel c1 into prod: it gains a row; back to dev: it loses it.
		w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: map[string]string{"env": "prod"}},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "c1-kubeconfig"}})
		w.waitRows(all, "c1/Secret/creds@apps=SourceMissing", "c2/Secret/creds@apps=SourceMissing")
		w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: map[string]string{"env": "dev"}},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "c1-kubeconfig"}})
		w.waitRows(all, "c2/Secret/creds@apps=SourceMissing")

		// A group's selector changes: its target follows.
		w.apply(helmOp("app", root, fleet.BundleTarget{ClusterGroup: "dev"}))
		w.waitRows(all, "c1/Secret/creds@apps=SourceMissing")
		w.apply(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "dev"},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}}})
		w.waitRows(all, "c1/Secret/creds@apps=SourceMissing", "c2/Secret/creds@apps=SourceMissing")
	})
}
