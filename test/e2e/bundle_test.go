package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
)

// gitRepoBundle is a Bundle as Fleet's gitjob makes it from a GitRepo
// (`fleet apply`): the GitRepo's name in fleet.cattle.io/repo-name, the
// fleet.yaml's targetCustomizations first in spec.targets, then the
// GitRepo's targets, which are also the Bundle's targetRestrictions.
func gitRepoBundle(name, repo string, root fleet.BundleDeploymentOptions, gitRepoTargets []fleet.BundleTarget, customizations ...fleet.BundleTarget) *fleet.Bundle {
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			fleet.LabelRepoName: repo, "fleet.cattle.io/commit": "0123456789abcdef0123456789abcdef01234567"}},
		Spec: fleet.BundleSpec{BundleDeploymentOptions: root, Targets: append(customizations, gitRepoTargets...)},
	}
	for _, t := range gitRepoTargets {
		b.Spec.TargetRestrictions = append(b.Spec.TargetRestrictions, fleet.BundleTargetRestriction{
			Name: t.Name, ClusterName: t.ClusterName, ClusterSelector: t.ClusterSelector,
			ClusterGroup: t.ClusterGroup, ClusterGroupSelector: t.ClusterGroupSelector})
	}
	return b
}

func envIn(values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: values}}}
}

// TestBundleCopies: a GitRepo's Bundle gets copies exactly where Fleet
// deploys it -- its targetCustomizations add entries to the Clusters they
// match, never widen the GitRepo's targets -- and change, prune, untarget,
// delete and keepResources behave as for HelmOps.
func TestBundleCopies(t *testing.T) {
	w := newWorkspace(t, "ws-bundle", map[string]string{"env": "prod"}, map[string]string{"env": "dev"})
	dest := "bundle-dest"
	for _, name := range []string{"creds", "prod-only"} {
		w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": name + "-1"}})
	}
	for _, name := range []string{"settings", "dev-only"} {
		w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": name}})
	}
	root := fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/creds", "ConfigMap/settings")}
	prod := fleet.BundleTarget{Name: "prod", ClusterSelector: envIn("prod"),
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/prod-only")}}
	dev := fleet.BundleTarget{Name: "dev", ClusterSelector: envIn("dev"),
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DownstreamResources: resources("ConfigMap/dev-only")}}
	onlyProd := []fleet.BundleTarget{{Name: "gitrepo", ClusterSelector: envIn("prod")}}
	both := []fleet.BundleTarget{{Name: "gitrepo", ClusterSelector: envIn("prod", "dev")}}

	w.apply(gitRepoBundle("repo-app", "repo", root, onlyProd, prod, dev))
	w.waitRows(metav1.ListOptions{FieldSelector: "spec.owner.kind=Bundle,spec.gitRepo=repo"},
		"c1/ConfigMap/settings@"+dest+"=Synced", "c1/Secret/creds@"+dest+"=Synced", "c1/Secret/prod-only@"+dest+"=Synced")
	s, err := downstream(t, 0).CoreV1().Secrets(dest).Get(context.Background(), "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Annotations[copyspec.AnnotationBundle] != w.ns+"/repo-app" || s.Annotations[copyspec.AnnotationHelmOp] != "" {
		t.Errorf("copy annotations: %v", s.Annotations)
	}
	// The engine's Events name the Bundle, with its UID, as kubectl
	// describe bundle finds them.
	b, err := fleetClient(t).FleetV1alpha1().Bundles(w.ns).Get(context.Background(), "repo-app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a Copied Event on the Bundle", func() (bool, string) {
		out := kubectl(t, "get", "events", "-n", w.ns, "--field-selector",
			"involvedObject.kind=Bundle,involvedObject.name=repo-app,involvedObject.uid="+string(b.UID)+",reason=Copied", "-o", "name")
		return strings.TrimSpace(out) != "", out
	})
	// c2's customization matches it, but the GitRepo does not target it.
	// Positive control: once the GitRepo targets dev too, it is copied.
	if _, err := downstream(t, 1).CoreV1().ConfigMaps(dest).Get(context.Background(), "dev-only", metav1.GetOptions{}); err == nil {
		t.Errorf("dev-only copied to c2, which the GitRepo does not target")
	}
	w.apply(gitRepoBundle("repo-app", "repo", root, both, prod, dev))
	w.waitRows(metav1.ListOptions{FieldSelector: "spec.owner.name=repo-app"},
		"c1/ConfigMap/settings@"+dest+"=Synced", "c1/Secret/creds@"+dest+"=Synced", "c1/Secret/prod-only@"+dest+"=Synced",
		"c2/ConfigMap/dev-only@"+dest+"=Synced", "c2/ConfigMap/settings@"+dest+"=Synced", "c2/Secret/creds@"+dest+"=Synced")
	waitConfigMap(t, 1, dest, "dev-only", 10*time.Second, "copied", func(m *corev1.ConfigMap) bool { return m != nil && m.Data["k"] == "dev-only" })
	if _, err := downstream(t, 1).CoreV1().Secrets(dest).Get(context.Background(), "prod-only", metav1.GetOptions{}); err == nil {
		t.Errorf("prod-only copied to c2, which only the dev customization matches")
	}

	t.Run("a source change reaches every cluster", func(t *testing.T) {
		w.t = t
		w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"k": "creds-2"}})
		for i := range env.Downstreams {
			waitSecret(t, i, dest, "creds", 10*time.Second, "k=creds-2", secretData("k", "creds-2"))
		}
	})
	t.Run("an entry removed from the root is pruned", func(t *testing.T) {
		w.t = t
		pruned := root
		pruned.DownstreamResources = resources("Secret/creds")
		w.apply(gitRepoBundle("repo-app", "repo", pruned, both, prod, dev))
		for i := range env.Downstreams {
			waitConfigMap(t, i, dest, "settings", 10*time.Second, "removed", func(m *corev1.ConfigMap) bool { return m == nil })
		}
	})
	t.Run("a Cluster no longer targeted loses its copies", func(t *testing.T) {
		w.t = t
		w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c2", Labels: map[string]string{"env": "staging"}},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "c2-kubeconfig"}})
		waitSecret(t, 1, dest, "creds", 10*time.Second, "removed", absentSecret)
		waitConfigMap(t, 1, dest, "dev-only", 10*time.Second, "removed", func(m *corev1.ConfigMap) bool { return m == nil })
		waitSecret(t, 0, dest, "creds", time.Second, "still on c1", secretData("k", "creds-2"))
	})
	t.Run("deleting the Bundle with keepResources keeps its copies", func(t *testing.T) {
		w.t = t
		kept := root
		kept.DownstreamResources, kept.KeepResources = resources("Secret/creds"), true
		w.apply(gitRepoBundle("repo-app", "repo", kept, both, prod, dev))
		for _, name := range []string{"creds", "prod-only"} {
			waitSecret(t, 0, dest, name, 10*time.Second, "written under keepResources", func(s *corev1.Secret) bool {
				return s != nil && s.Annotations[copyspec.AnnotationKeep] == "true"
			})
		}
		if err := fleetClient(t).FleetV1alpha1().Bundles(w.ns).Delete(context.Background(), "repo-app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitRows(metav1.ListOptions{FieldSelector: "spec.owner.name=repo-app"},
			"c1/Secret/creds@"+dest+"=Kept", "c1/Secret/prod-only@"+dest+"=Kept")
		waitSecret(t, 0, dest, "prod-only", time.Second, "kept", secretData("k", "prod-only-1"))
	})
}

// TestBundleOfHelmOp: Fleet makes a Bundle of every HelmOp, labelled
// fleet.cattle.io/fleet-helm-name. Courier reads the HelmOp and ignores
// that Bundle: one set of copies and rows. A GitRepo Bundle of the same
// name as a HelmOp is an owner of its own: both copied, rows apart.
func TestBundleOfHelmOp(t *testing.T) {
	w := newWorkspace(t, "ws-bundle-helmop", nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "op-creds"}, StringData: map[string]string{"k": "op"}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-creds"}, StringData: map[string]string{"k": "git"}})
	opts := fleet.BundleDeploymentOptions{TargetNamespace: "bundle-helmop", DownstreamResources: resources("Secret/op-creds")}
	w.apply(helmOp("app", opts))
	fromHelmOp := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{fleet.LabelHelmOpName: "app"}},
		Spec:       fleet.BundleSpec{BundleDeploymentOptions: opts, Targets: []fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}}},
	}
	w.apply(fromHelmOp)
	w.waitRows(metav1.ListOptions{}, "c1/Secret/op-creds@bundle-helmop=Synced")

	// Fleet never makes both for one name, but a GitRepo's Bundle may share
	// a HelmOp's name in one namespace: a second owner, rows and copies apart.
	if err := fleetClient(t).FleetV1alpha1().Bundles(w.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.apply(gitRepoBundle("app", "repo", fleet.BundleDeploymentOptions{TargetNamespace: "bundle-helmop", DownstreamResources: resources("Secret/git-creds")},
		[]fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/git-creds@bundle-helmop=Synced", "c1/Secret/op-creds@bundle-helmop=Synced")
	waitSecret(t, 0, "bundle-helmop", "git-creds", 10*time.Second, "copied", secretData("k", "git"))
	waitSecret(t, 0, "bundle-helmop", "op-creds", time.Second, "still there", secretData("k", "op"))
	list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].Name == list.Items[1].Name {
		t.Fatalf("rows: %+v", list.Items)
	}
	out := kubectl(t, "get", "dcp", "-n", w.ns)
	if !strings.Contains(out, "bundle:app") || !strings.Contains(out, " app ") {
		t.Errorf("kubectl get dcp does not show both owners apart:\n%s", out)
	}
	// One summary per owner: the HelmOp's named like it, the Bundle's
	// bundle:<name>; kubectl wait works on both.
	for _, name := range []string{"app", "bundle:app"} {
		kubectl(t, "wait", "--for=condition=Ready", "dcs/"+name, "-n", w.ns, "--timeout=60s")
	}
	dcs := kubectl(t, "get", "dcs", "-n", w.ns, "-o", "custom-columns=NAME:.metadata.name,KIND:.spec.owner.kind,OWNER:.spec.owner.name,REPO:.spec.gitRepo,COPIES:.status.copies", "--no-headers")
	if got := strings.Join(strings.Fields(dcs), " "); got != "app HelmOp app <none> 1 bundle:app Bundle app repo 1" {
		t.Errorf("kubectl get dcs:\n%s", dcs)
	}

	// Deleting the GitRepo's Bundle removes its copies, not the HelmOp's.
	if err := fleetClient(t).FleetV1alpha1().Bundles(w.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, 0, "bundle-helmop", "git-creds", 10*time.Second, "removed", absentSecret)
	w.waitRows(metav1.ListOptions{}, "c1/Secret/op-creds@bundle-helmop=Synced")
}
