package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// The admission policy of artifacts/admission/ (and the chart): a HelmOp
// may list in downstreamResources only Secrets its author may get
// (docs/security.md). These tests apply the files as shipped to the real
// upstream kube-apiserver and write HelmOps as users bound to real Roles.

const (
	admissionPolicyName = "courier-export-requires-get"
	// admissionPerName and admissionEntries are the policy's limits: distinct
	// Secrets checked one by one, entries looked at (docs/security.md).
	admissionPerName = 25
	admissionEntries = 100
)

// as returns a clientset that impersonates user (the suite's admin may).
func as(t *testing.T, user string) versioned.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Upstream.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bindRole creates a Role with rules in the workspace and binds it to
// subject (a User, or a ServiceAccount given as namespace/name).
func (w *workspace) bindRole(name, subject string, rules ...rbacv1.PolicyRule) {
	w.t.Helper()
	ctx := context.Background()
	if _, err := w.c.kube.RbacV1().Roles(w.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	s := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: subject}
	if ns, sa, ok := strings.Cut(subject, "/"); ok {
		s = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}
	}
	if _, err := w.c.kube.RbacV1().RoleBindings(w.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects: []rbacv1.Subject{s}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

var helmOpAuthor = rbacv1.PolicyRule{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"helmops"}, Verbs: []string{"create", "update", "patch", "get", "list"}}

func getSecrets(names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: names}
}

// createAs creates op in the workspace as c; dryRun leaves nothing behind.
func (w *workspace) createAs(c versioned.Interface, op *fleet.HelmOp, dryRun bool) error {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := c.FleetV1alpha1().HelmOps(w.ns).Create(context.Background(), op, opts)
	return err
}

// refusedNaming checks that err is the policy's refusal naming Secret name,
// with every other of want in its text.
func refusedNaming(t *testing.T, err error, name string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a refusal naming Secret %q", name)
	}
	msg := err.Error()
	if !apierrors.IsForbidden(err) || !strings.Contains(msg, admissionPolicyName) {
		t.Fatalf("want the admission policy's Forbidden refusal, got (%v) %v", apierrors.ReasonForError(err), err)
	}
	for _, s := range append([]string{`Secret "` + name + `"`}, want...) {
		if !strings.Contains(msg, s) {
			t.Errorf("the refusal does not say %q: %s", s, msg)
		}
	}
}

// installAdmissionPolicy applies artifacts/admission/ as shipped and waits
// until refused() says the policy is enforced (a policy takes a moment to
// load); on cleanup it deletes the files and waits until it is not, so that
// later tests write HelmOps without it.
func installAdmissionPolicy(t *testing.T, refused func() (bool, string)) {
	t.Helper()
	dir := filepath.Join(repoRoot, "artifacts", "admission")
	kubectl(t, "apply", "-f", dir)
	t.Cleanup(func() {
		if _, err := env.Kubectl(context.Background(), env.Upstream, "delete", "--ignore-not-found", "-f", dir); err != nil {
			t.Errorf("removing the admission policy: %v", err)
			return
		}
		eventually(t, "the admission policy is no longer enforced", func() (bool, string) {
			ok, msg := refused()
			return !ok, msg
		})
	})
	eventually(t, "the admission policy is enforced", refused)
}

// TestAdmissionPolicy: with the shipped policy installed, a user who may
// edit HelmOps and get only Secret a may list a (and its copy is made) but
// not b, neither at the root, nor in a target, nor by an update; a
// cluster-admin may list b; ConfigMaps are not checked; Fleet's controllers
// and Courier are exempt.
func TestAdmissionPolicy(t *testing.T) {
	ctx := context.Background()
	w := newWorkspace(t, "ws-admission", nil)
	w.apply(selectAll("default"))
	for _, s := range []string{"a", "b"} {
		w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s}, StringData: map[string]string{"k": "v-" + s}})
	}
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "v"}})
	w.bindRole("alice", "alice", helmOpAuthor, getSecrets("a"))
	alice := as(t, "alice")
	dest := "admission-dest"
	listing := func(name string, kindNames ...string) *fleet.HelmOp {
		return helmOp(name, fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources(kindNames...)})
	}

	// The probe: alice's dry-run HelmOp listing b.
	installAdmissionPolicy(t, func() (bool, string) {
		err := w.createAs(alice, listing("probe", "Secret/b"), true)
		return apierrors.IsForbidden(err) && strings.Contains(fmt.Sprint(err), `Secret "b"`), fmt.Sprintf("alice's probe listing b: %v", err)
	})
	checkTypeChecking(t)

	t.Run("listing a Secret she may get is accepted and copied", func(t *testing.T) {
		if err := w.createAs(alice, listing("ok", "Secret/a"), false); err != nil {
			t.Fatalf("alice's HelmOp listing a: %v", err)
		}
		waitSecret(t, 0, dest, "a", 60*time.Second, "copied", secretData("k", "v-a"))
	})
	t.Run("listing one she may not get is refused, naming it", func(t *testing.T) {
		refusedNaming(t, w.createAs(alice, listing("leak", "Secret/a", "secret/b"), false), "b", "alice may not get", "spec.downstreamResources")
		if _, err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Get(ctx, "leak", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused HelmOp exists (err %v)", err)
		}
	})
	t.Run("a per-target entry is checked the same way", func(t *testing.T) {
		op := listing("leak-target", "Secret/a")
		op.Spec.Targets = []fleet.BundleTarget{{ClusterName: "c1", BundleDeploymentOptions: fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/b")}}}
		refusedNaming(t, w.createAs(alice, op, false), "b", "spec.targets[].downstreamResources")
	})
	t.Run("an update adding it is refused", func(t *testing.T) {
		cur, err := alice.FleetV1alpha1().HelmOps(w.ns).Get(ctx, "ok", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.DownstreamResources = append(cur.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "SECRET", Name: "b"})
		_, err = alice.FleetV1alpha1().HelmOps(w.ns).Update(ctx, cur, metav1.UpdateOptions{})
		refusedNaming(t, err, "b")
		// Positive control: an update she may make goes through.
		cur, err = alice.FleetV1alpha1().HelmOps(w.ns).Get(ctx, "ok", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels["edited"] = "yes"
		if _, err := alice.FleetV1alpha1().HelmOps(w.ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Errorf("alice's update keeping only a: %v", err)
		}
	})
	t.Run("ConfigMaps are not checked", func(t *testing.T) {
		// alice may not read ConfigMap c at all.
		if err := w.createAs(alice, listing("configmap", "ConfigMap/c"), false); err != nil {
			t.Errorf("alice's HelmOp listing ConfigMap c: %v", err)
		}
	})
	t.Run("a cluster-admin may list it", func(t *testing.T) {
		if err := w.createAs(fleetClient(t), listing("admin", "Secret/b"), false); err != nil {
			t.Errorf("the admin's HelmOp listing b: %v", err)
		}
	})
	t.Run("Fleet's controllers and Courier are exempt", func(t *testing.T) {
		for _, sa := range []string{"cattle-fleet-system/helmops", "cattle-fleet-system/fleet-controller", "cattle-fleet-system/gitjob", "courier-system/courier", "cattle-fleet-system/not-fleet"} {
			ns, name, _ := strings.Cut(sa, "/")
			w.bindRole("author-"+ns+"-"+name, sa, helmOpAuthor)
			user := "system:serviceaccount:" + ns + ":" + name
			var err error
			eventually(t, user+"'s RBAC", func() (bool, string) {
				err = w.createAs(as(t, user), listing("sa", "Secret/b"), true)
				return err == nil || !apierrors.IsForbidden(err) || strings.Contains(err.Error(), admissionPolicyName), fmt.Sprint(err)
			})
			if name == "not-fleet" {
				// Positive control: the same rights, not exempt.
				refusedNaming(t, err, "b", user+" may not get")
			} else if err != nil {
				t.Errorf("%s is refused: %v", user, err)
			}
		}
	})
}

// checkTypeChecking fails when the kube-apiserver's type check of the
// policy against the HelmOp schema warns about an expression.
func checkTypeChecking(t *testing.T) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	var warnings []any
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := dyn.Resource(gvr).Get(ctx, admissionPolicyName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
		warnings, _, _ = unstructured.NestedSlice(p.Object, "status", "typeChecking", "expressionWarnings")
		return observed == p.GetGeneration(), nil
	})
	if err != nil {
		t.Errorf("the policy's type check did not finish: %v", err)
	}
	if len(warnings) > 0 {
		t.Errorf("the kube-apiserver's type check warns about the policy: %v", warnings)
	}
}

// TestAdmissionPolicyCost lists many Secrets, root and per target, so that
// the policy spends what the CEL cost budget of one request allows:
// 25 distinct Secrets checked one by one (plus the namespace-wide check),
// refusals still naming the Secret; more than that is refused with a
// message saying so, unless the author may get every Secret of the
// namespace (one check).
func TestAdmissionPolicyCost(t *testing.T) {
	w := newWorkspace(t, "ws-admission-cost", nil)
	names := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprintf("Secret/s%02d", i))
		}
		return out
	}
	// 20 at the root and 10 in each of three targets: 50 entries.
	big := func(name string, root []string, targets ...[]string) *fleet.HelmOp {
		op := helmOp(name, fleet.BundleDeploymentOptions{TargetNamespace: "cost-dest", DownstreamResources: resources(root...)})
		for i, tr := range targets {
			op.Spec.Targets = append(op.Spec.Targets, fleet.BundleTarget{Name: fmt.Sprintf("t%d", i+1), ClusterName: "c1",
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{DownstreamResources: resources(tr...)}})
		}
		return op
	}
	var granted []string
	for i := 1; i <= admissionPerName+1; i++ {
		granted = append(granted, fmt.Sprintf("s%02d", i))
	}
	w.bindRole("carol", "carol", helmOpAuthor, getSecrets(granted...))
	w.bindRole("bob", "bob", helmOpAuthor, getSecrets())
	w.bindRole("alice", "alice", helmOpAuthor, getSecrets("s01"))
	carol, bob := as(t, "carol"), as(t, "bob")
	installAdmissionPolicy(t, func() (bool, string) {
		err := w.createAs(as(t, "alice"), big("probe", names(1, 2)), true)
		return apierrors.IsForbidden(err) && strings.Contains(fmt.Sprint(err), `Secret "s02"`), fmt.Sprintf("alice's probe: %v", err)
	})

	// 25 distinct: s01..s20 at the root, s11..s20, s16..s25 and s01..s10
	// in the targets.
	full := big("full", names(1, 20), names(11, 20), names(16, 25), names(1, 10))
	t.Run("25 distinct Secrets in 50 entries, each granted by name: accepted", func(t *testing.T) {
		if err := w.createAs(carol, full, false); err != nil {
			t.Fatalf("carol's HelmOp: %v", err)
		}
	})
	t.Run("the 25th, in a target, not granted: refused naming it", func(t *testing.T) {
		op := big("last", names(1, 20), names(11, 20), append(names(16, 24), "Secret/s99"), names(1, 10))
		refusedNaming(t, w.createAs(carol, op, true), "s99", "carol may not get", "spec.targets[].downstreamResources")
	})
	t.Run("26 distinct, each granted by name: refused, saying the policy's limit", func(t *testing.T) {
		op := big("over", names(1, 20), names(11, 20), names(16, 26), names(1, 10))
		err := w.createAs(carol, op, true)
		if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("at most %d distinct Secrets", admissionPerName)) {
			t.Fatalf("want the refusal naming the limit, got %v", err)
		}
	})
	t.Run("50 distinct by someone who may get every Secret: accepted", func(t *testing.T) {
		op := big("wide", names(1, 20), names(21, 30), names(31, 40), names(41, 50))
		if err := w.createAs(bob, op, true); err != nil {
			t.Fatalf("bob's HelmOp: %v", err)
		}
	})
	t.Run(fmt.Sprintf("more than %d entries by someone who may get every Secret: accepted", admissionEntries), func(t *testing.T) {
		var many []string
		for i := 0; i <= admissionEntries; i++ {
			many = append(many, fmt.Sprintf("Secret/m%03d", i))
		}
		if err := w.createAs(bob, big("many", many), true); err != nil {
			t.Fatalf("bob's HelmOp: %v", err)
		}
	})
	t.Run(fmt.Sprintf("%d entries of %d distinct Secrets granted by name: accepted, one more refused", admissionEntries, admissionPerName), func(t *testing.T) {
		// The most the policy spends: every check, and the longest list.
		var repeated []string
		for i := 0; i < admissionEntries; i++ {
			repeated = append(repeated, fmt.Sprintf("Secret/s%02d", i%admissionPerName+1))
		}
		if err := w.createAs(carol, big("repeated", repeated[:80], repeated[80:90], repeated[90:]), true); err != nil {
			t.Fatalf("carol's HelmOp with %d entries: %v", admissionEntries, err)
		}
		repeated = append(repeated, "Secret/s01")
		err := w.createAs(carol, big("repeated", repeated), true)
		if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("(%d entries)", admissionEntries)) {
			t.Fatalf("carol's HelmOp with %d entries: want the refusal naming the limit, got %v", admissionEntries+1, err)
		}
	})
	t.Run("an update is checked like a create", func(t *testing.T) {
		cur, err := carol.FleetV1alpha1().HelmOps(w.ns).Get(context.Background(), "full", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// t2's s25 (listed nowhere else) becomes s99: still 25 distinct.
		cur.Spec.Targets[1].DownstreamResources[9] = fleet.DownstreamResource{Kind: "secret", Name: "s99"}
		_, err = carol.FleetV1alpha1().HelmOps(w.ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		refusedNaming(t, err, "s99", "spec.targets[].downstreamResources")
	})
}

// TestHelmAdmissionPolicy: the chart renders the policy and binding of
// artifacts/admission/ by default (the same spec, with the exempt
// ServiceAccount of the release namespace), renders neither with
// admissionPolicy.enabled=false, and takes the exempt usernames from
// values. TestHelmTemplateAppliesServerSide has the server accept them.
func TestHelmAdmissionPolicy(t *testing.T) {
	var plain []*unstructured.Unstructured
	files, err := filepath.Glob(filepath.Join(repoRoot, "artifacts", "admission", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in artifacts/admission (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, decodeAll(t, string(data))...)
	}
	chart := decodeAll(t, helm(t, "template", "courier", chartDir, "-n", installNamespace))
	for _, name := range []string{admissionPolicyName, fieldCopyPolicyName} {
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			p, c := find(t, plain, kind, name), find(t, chart, kind, name)
			if !reflect.DeepEqual(p.Object["spec"], c.Object["spec"]) {
				t.Errorf("the chart's %s %s differs from artifacts/admission's:\nchart: %v\nplain: %v", kind, name, c.Object["spec"], p.Object["spec"])
			}
		}
	}
	policy := find(t, plain, "ValidatingAdmissionPolicy", admissionPolicyName)
	if fp, _, _ := unstructured.NestedString(policy.Object, "spec", "failurePolicy"); fp != "Fail" {
		t.Errorf("failurePolicy %q, want Fail", fp)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(policy.Object, "spec", "paramKind"); found {
		t.Errorf("the policy has a paramKind: it needs none")
	}
	vals, _, _ := unstructured.NestedSlice(policy.Object, "spec", "validations")
	if len(vals) != admissionPerName+1 {
		t.Errorf("%d validations, want %d (the limit check and one per distinct Secret)", len(vals), admissionPerName+1)
	}

	t.Run("off", func(t *testing.T) {
		out := helm(t, "template", "courier", chartDir, "-n", installNamespace, "--set", "admissionPolicy.enabled=false")
		for _, o := range decodeAll(t, out) {
			if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
				t.Errorf("with admissionPolicy.enabled=false the chart renders %s %s", o.GetKind(), o.GetName())
			}
		}
	})
	t.Run("secret sources set with the policies", func(t *testing.T) {
		out := helm(t, "template", "courier", chartDir, "-n", installNamespace, "--set", "fieldCopy.targets={configmaps}")
		if !strings.Contains(out, "--fieldcopy-secret-sources=true") {
			t.Error("with field-copy targets and the admission policies the chart does not set --fieldcopy-secret-sources")
		}
		off := helm(t, "template", "courier", chartDir, "-n", installNamespace, "--set", "fieldCopy.targets={configmaps}",
			"--set", "admissionPolicy.enabled=false", "--set", "fieldCopy.secretSources=false")
		if strings.Contains(off, "--fieldcopy-secret-sources") {
			t.Error("without the admission policies the chart sets --fieldcopy-secret-sources")
		}
	})
	t.Run("exempt usernames", func(t *testing.T) {
		// Only the policy and binding: they are cluster-scoped, and namespace
		// elsewhere does not exist.
		rendered := helm(t, "template", "courier", chartDir, "-n", "elsewhere", "--show-only", "templates/admission-policy.yaml",
			"--set", "admissionPolicy.exemptUsernames={system:serviceaccount:ops:deployer}")
		conds, _, _ := unstructured.NestedSlice(find(t, decodeAll(t, rendered), "ValidatingAdmissionPolicy", admissionPolicyName).Object, "spec", "matchConditions")
		expr := fmt.Sprint(conds)
		if !strings.Contains(expr, `["system:serviceaccount:elsewhere:courier","system:serviceaccount:ops:deployer"]`) || strings.Contains(expr, "fleet-controller") {
			t.Errorf("matchConditions: %s", expr)
		}
		out := applyDryRun(t, rendered)
		if !strings.Contains(out, "validatingadmissionpolicy.admissionregistration.k8s.io/"+admissionPolicyName) {
			t.Errorf("kubectl apply --dry-run=server output lacks the policy:\n%s", out)
		}
	})
}
