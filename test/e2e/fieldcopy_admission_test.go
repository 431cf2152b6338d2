package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fieldCopyPolicyName is the second policy of artifacts/admission/: a
// field-copy rule's author must be able to get its source
// (docs/security.md#field-copies).
const fieldCopyPolicyName = "courier-fieldcopy-requires-get"

// kubeAs returns a clientset that impersonates user (the suite's admin may).
func kubeAs(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Upstream.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refusedByFieldCopyPolicy checks that err is the field-copy policy's
// refusal and that it names the source.
func refusedByFieldCopyPolicy(t *testing.T, what string, err error, source string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: admitted; want the field-copy policy's refusal naming %s", what, source)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), fieldCopyPolicyName) {
		t.Fatalf("%s: want the field-copy policy's Forbidden refusal, got (%v) %v", what, apierrors.ReasonForError(err), err)
	}
	if !strings.Contains(err.Error(), source) {
		t.Errorf("%s: the refusal does not name %s: %v", what, source, err)
	}
}

func ruleConfigMap(name string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Data: map[string]string{"note": "target"}}
}

// TestFieldCopyAdmissionPolicy: with artifacts/admission/ installed in the
// real upstream, a user who may edit ConfigMaps and get only Secret
// "allowed" is refused a ConfigMap whose rule (either annotation form)
// names Secret "vault", the refusal naming it; the same user naming
// "allowed" is admitted and the copy lands; on a ConfigMap whose rule an
// admin wrote, that user's edit of another annotation passes, and a change
// of the rule does not.
func TestFieldCopyAdmissionPolicy(t *testing.T) {
	ctx := context.Background()
	fieldCopySetup(t)
	w := newWorkspace(t, "fc-admission")
	const user = "fc-author"
	w.bindRole("fc-author", user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		getSecrets("allowed"))
	// Courier may update the ConfigMaps it copies into, here only.
	w.bindRole("courier-configmap-writer", "courier-system/courier",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update"}})
	for name, value := range map[string]string{"vault": "vault-value", "allowed": "allowed-value"} {
		w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"k": []byte(value)}})
	}
	author := kubeAs(t, user).CoreV1().ConfigMaps(w.ns)
	admin := w.c.kube.CoreV1().ConfigMaps(w.ns)
	vaultRule := map[string]string{"k8s-copier.fig.org/replace-data.v": "secret:vault:data.k"}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	installAdmissionPolicy(t, func() (bool, string) {
		_, err := author.Create(ctx, ruleConfigMap("probe", vaultRule), dryRun)
		if err == nil {
			return false, "admitted"
		}
		return strings.Contains(err.Error(), fieldCopyPolicyName), err.Error()
	})

	_, err := author.Create(ctx, ruleConfigMap("t-key", vaultRule), metav1.CreateOptions{})
	refusedByFieldCopyPolicy(t, "a replace- annotation naming vault", err, `secrets "vault" in namespace fc-admission`)
	_, err = author.Create(ctx, ruleConfigMap("t-list", map[string]string{
		"courier.dev/field-copies": `[{"to": "data[x.y]", "from": "secrets.v1:fc-admission/vault:data.k"}]`}), metav1.CreateOptions{})
	refusedByFieldCopyPolicy(t, "a courier.dev/field-copies rule naming vault", err, `secrets "vault"`)
	_, err = author.Create(ctx, ruleConfigMap("t-escaped", map[string]string{
		"courier.dev/field-copies": `[{"to": "data.v", "fr\u006fm": "secret:vault:data.k"}]`}), metav1.CreateOptions{})
	refusedByFieldCopyPolicy(t, "an escaped courier.dev/field-copies list", err, "backslash")

	// The positive control: the same user, a Secret they may get.
	if _, err := author.Create(ctx, ruleConfigMap("t-allowed", map[string]string{"k8s-copier.fig.org/replace-data.v": "secret:allowed:data.k"}),
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("a rule naming a Secret the user may get was refused: %v", err)
	}
	waitFieldCopy(t, w.ns, "configmap.t-allowed.data.v", "Applied", "")
	if cm, err := admin.Get(ctx, "t-allowed", metav1.GetOptions{}); err != nil || cm.Data["v"] != b64("allowed-value") {
		t.Errorf("the admitted copy did not land: %v %v", cm.Data, err)
	}

	// An older rule naming vault, written by an admin (who may get it).
	if _, err := admin.Create(ctx, ruleConfigMap("t-old", vaultRule), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the admin's rule was refused: %v", err)
	}
	waitFieldCopy(t, w.ns, "configmap.t-old.data.v", "Applied", "")
	cm, err := author.Get(ctx, "t-old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations["team"] = "blue"
	if _, err := author.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an unrelated edit of an object carrying an older rule was refused: %v", err)
	}
	cm, err = author.Get(ctx, "t-old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations["k8s-copier.fig.org/replace-data.v"] = "secret:vault:data"
	_, err = author.Update(ctx, cm, metav1.UpdateOptions{})
	refusedByFieldCopyPolicy(t, "a changed rule naming vault", err, `secrets "vault"`)
}

// TestFieldCopyAdmissionPolicyCost: the most distinct sources the policy
// checks in one request (10, each an authorizer check) are checked within
// the real kube-apiserver's CEL cost limits and admitted for a user who
// may get them all; one more is refused with a message saying why.
func TestFieldCopyAdmissionPolicyCost(t *testing.T) {
	ctx := context.Background()
	w := newWorkspace(t, "fc-admission-cost")
	const user = "fc-many"
	var names []string
	for i := 0; i <= 10; i++ {
		names = append(names, fmt.Sprintf("s%d", i))
	}
	w.bindRole("fc-many", user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		getSecrets(names...))
	author := kubeAs(t, user).CoreV1().ConfigMaps(w.ns)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	rules := func(n int) map[string]string {
		a := map[string]string{}
		for i := 0; i < n; i++ {
			a[fmt.Sprintf("k8s-copier.fig.org/replace-data.v%d", i)] = fmt.Sprintf("secret:s%d:data.k", i)
		}
		return a
	}
	installAdmissionPolicy(t, func() (bool, string) {
		_, err := author.Create(ctx, ruleConfigMap("probe", map[string]string{"k8s-copier.fig.org/replace-data.v": "secret:vault:data.k"}), dryRun)
		if err == nil {
			return false, "admitted"
		}
		return strings.Contains(err.Error(), fieldCopyPolicyName), err.Error()
	})
	if _, err := author.Create(ctx, ruleConfigMap("ten", rules(10)), dryRun); err != nil {
		t.Errorf("10 distinct sources the user may get were refused: %v", err)
	}
	_, err := author.Create(ctx, ruleConfigMap("eleven", rules(11)), dryRun)
	refusedByFieldCopyPolicy(t, "11 distinct sources", err, "at most 10 distinct sources")
}
