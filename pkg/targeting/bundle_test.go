package targeting

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

func bundle(root v1alpha1.BundleDeploymentOptions, restrictions []v1alpha1.BundleTargetRestriction, targets ...v1alpha1.BundleTarget) *v1alpha1.Bundle {
	return &v1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "repo-path"},
		Spec:       v1alpha1.BundleSpec{BundleDeploymentOptions: root, Targets: targets, TargetRestrictions: restrictions},
	}
}

// gitRepoTarget is a GitRepo target as `fleet apply` writes it: the same
// criteria once as a target and once as a restriction.
func gitRepoTarget(name, group string) (v1alpha1.BundleTarget, v1alpha1.BundleTargetRestriction) {
	return v1alpha1.BundleTarget{Name: name, ClusterGroup: group}, v1alpha1.BundleTargetRestriction{Name: name, ClusterGroup: group}
}

func TestResolveBundle(t *testing.T) {
	root := v1alpha1.BundleDeploymentOptions{DownstreamResources: []v1alpha1.DownstreamResource{res("Secret", "s")}}
	allT, allR := gitRepoTarget("all", "all")
	prodT, prodR := gitRepoTarget("prod", "prod")
	custProd := v1alpha1.BundleTarget{Name: "cust-prod", ClusterSelector: matchLabels("env", "prod"),
		BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{TargetNamespace: "prod-ns", DownstreamResources: []v1alpha1.DownstreamResource{res("ConfigMap", "p")}}}
	custEU := v1alpha1.BundleTarget{Name: "cust-eu", ClusterSelector: matchLabels("region", "eu"),
		BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{ServiceAccount: "eu-sa", KeepResources: true, DownstreamResources: []v1alpha1.DownstreamResource{res("Secret", "e")}}}
	custDev := v1alpha1.BundleTarget{Name: "cust-dev", ClusterSelector: matchLabels("env", "dev"), BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{DownstreamResources: []v1alpha1.DownstreamResource{res("Secret", "d")}}}
	rootOnly := Options{Resources: root.DownstreamResources, Namespace: "default"}
	with := func(ns, sa string, keep bool, extra ...v1alpha1.DownstreamResource) Options {
		return Options{Resources: append(append([]v1alpha1.DownstreamResource{}, root.DownstreamResources...), extra...), Namespace: ns, ServiceAccount: sa, KeepResources: keep}
	}
	allMatches := func(b *v1alpha1.Bundle) *v1alpha1.Bundle {
		b.Spec.TargetCustomizationMode = v1alpha1.TargetCustomizationModeAllMatches
		return b
	}
	dnd := func(t v1alpha1.BundleTarget) v1alpha1.BundleTarget { t.DoNotDeploy = true; return t }
	display := cluster(ws, "c-7x2k", map[string]string{ClusterDisplayNameLabel: "shop"})

	tests := []struct {
		name     string
		b        *v1alpha1.Bundle
		clusters []*v1alpha1.Cluster
		want     []Match
		problems int
	}{
		{name: "a Bundle without targets targets nothing (no implicit default)", b: bundle(root, nil)},
		{name: "without restrictions every target is plain: first match wins",
			b:    bundle(root, nil, custProd, v1alpha1.BundleTarget{Name: "rest", ClusterGroup: "all"}),
			want: []Match{m(cA, "cust-prod", with("prod-ns", "", false, res("ConfigMap", "p"))), m(cB, "rest", rootOnly), m(cC, "cust-prod", with("prod-ns", "", false, res("ConfigMap", "p")))}},
		{name: "GitRepo Bundle: customization applies to the Clusters it matches",
			b:    bundle(root, []v1alpha1.BundleTargetRestriction{allR}, custProd, allT),
			want: []Match{m(cA, "all", with("prod-ns", "", false, res("ConfigMap", "p"))), m(cB, "all", rootOnly), m(cC, "all", with("prod-ns", "", false, res("ConfigMap", "p")))}},
		{name: "a customization never widens the GitRepo's targets",
			b:    bundle(root, []v1alpha1.BundleTargetRestriction{prodR}, custDev, prodT),
			want: []Match{m(cA, "prod", rootOnly), m(cC, "prod", rootOnly)}},
		{name: "FirstMatch: only the first matching customization",
			b:    bundle(root, []v1alpha1.BundleTargetRestriction{allR}, custProd, custEU, allT),
			want: []Match{m(cA, "all", with("prod-ns", "", false, res("ConfigMap", "p"))), m(cB, "all", rootOnly), m(cC, "all", with("prod-ns", "", false, res("ConfigMap", "p")))}},
		{name: "AllMatches: every matching customization merged in order",
			b:    allMatches(bundle(root, []v1alpha1.BundleTargetRestriction{allR}, custProd, custEU, allT)),
			want: []Match{m(cA, "all", with("prod-ns", "eu-sa", true, res("ConfigMap", "p"), res("Secret", "e"))), m(cB, "all", rootOnly), m(cC, "all", with("prod-ns", "", false, res("ConfigMap", "p")))}},
		{name: "doNotDeploy on the first matching customization excludes (FirstMatch)",
			b:    bundle(root, []v1alpha1.BundleTargetRestriction{allR}, dnd(custEU), custProd, allT),
			want: []Match{m(cB, "all", rootOnly), m(cC, "all", with("prod-ns", "", false, res("ConfigMap", "p")))}},
		{name: "doNotDeploy on any matching customization excludes (AllMatches)",
			b:    allMatches(bundle(root, []v1alpha1.BundleTargetRestriction{allR}, custProd, dnd(custEU), allT)),
			want: []Match{m(cB, "all", rootOnly), m(cC, "all", with("prod-ns", "", false, res("ConfigMap", "p")))}},
		{name: "doNotDeploy on the GitRepo target excludes",
			b:    bundle(root, []v1alpha1.BundleTargetRestriction{prodR, allR}, dnd(prodT), allT),
			want: []Match{m(cB, "all", rootOnly)}},
		{name: "target and restriction must hold in the same group, as Fleet checks them",
			b: bundle(root, []v1alpha1.BundleTargetRestriction{{Name: "eu", ClusterGroup: "eu"}},
				v1alpha1.BundleTarget{Name: "prod", ClusterGroup: "prod"})},
		{name: "clusterName matches Rancher's display name too",
			b:        bundle(root, nil, v1alpha1.BundleTarget{Name: "shop", ClusterName: "shop"}),
			clusters: []*v1alpha1.Cluster{cA, display},
			want:     []Match{m(display, "shop", rootOnly)}},
		{name: "an invalid restriction matches nothing and is a problem",
			b:        bundle(root, []v1alpha1.BundleTargetRestriction{{Name: "bad", ClusterSelector: badSel}}, v1alpha1.BundleTarget{Name: "bad", ClusterSelector: badSel}),
			problems: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clusters := tc.clusters
			if clusters == nil {
				clusters = allClusters
			}
			got, problems := ResolveBundle(tc.b, clusters, groups)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("matches:\n got %s\nwant %s", describe(got), describe(tc.want))
			}
			if len(problems) != tc.problems {
				t.Errorf("problems = %v, want %d", problems, tc.problems)
			}
		})
	}
}
