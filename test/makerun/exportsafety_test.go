package makerun

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/localenv/localup"
)

// TestMakeRunIsSafeAsInstalled: on make run's setup, a field-copy rule
// naming downstream-1's kubeconfig Secret is refused at admission for a
// user who may edit ConfigMaps but not read Secrets (the message names the
// Secret), and for the admin, whom admission lets through, Courier refuses
// the rule itself: its row is Refused naming the rule, and the target
// never holds the kubeconfig. The example field copy beside it, from a
// ConfigMap, is Applied (the positive control)
// (docs/design.md#export-safety).
func TestMakeRunIsSafeAsInstalled(t *testing.T) {
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(setup.Env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	const editor = "makerun-configmap-editor"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: editor, Namespace: localup.Workspace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: editor, Namespace: localup.Workspace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: editor},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: editor}}}
	if _, err := admin.RbacV1().Roles(localup.Workspace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(localup.Workspace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	asEditor := rest.CopyConfig(setup.Env.Upstream.Config)
	asEditor.Impersonate = rest.ImpersonationConfig{UserName: editor}
	editorClient, err := kubernetes.NewForConfig(asEditor)
	if err != nil {
		t.Fatal(err)
	}

	const kubeconfigSecret = "downstream-1-kubeconfig"
	leak := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: localup.Workspace,
			Annotations: map[string]string{"k8s-copier.fig.org/replace-data": "secret:" + kubeconfigSecret + ":data"}},
			Data: map[string]string{"placeholder": "x"}}
	}
	// The editor: refused at admission, the message naming the Secret.
	// Waited for, since the policy's RBAC for Secrets may take a moment.
	var refusal error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, refusal = editorClient.CoreV1().ConfigMaps(localup.Workspace).Create(ctx, leak("makerun-leak-editor"), metav1.CreateOptions{})
		return refusal != nil && strings.Contains(refusal.Error(), kubeconfigSecret), nil
	}); err != nil {
		t.Fatalf("the editor's rule naming %s was not refused at admission: %v", kubeconfigSecret, refusal)
	}
	t.Logf("the editor was refused: %v", refusal)

	// The admin: admitted, then Refused by Courier.
	if _, err := admin.CoreV1().ConfigMaps(localup.Workspace).Create(ctx, leak("makerun-leak-admin"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the admin's ConfigMap was not admitted: %v", err)
	}
	courier, err := versioned.NewForConfig(setup.Env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	phases := func() (map[string]string, string) {
		list, err := courier.CourierV1alpha1().FieldCopies(localup.Workspace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err.Error()
		}
		out, all := map[string]string{}, ""
		for _, r := range list.Items {
			out[r.Spec.Target.Name] = string(r.Status.Phase) + " " + r.Status.Message
			all += r.Name + ": " + out[r.Spec.Target.Name] + "\n"
		}
		return out, all
	}
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		p, all := phases()
		last = all
		return strings.HasPrefix(p["makerun-leak-admin"], "Refused") && strings.Contains(p["makerun-leak-admin"], exportpolicy.RuleKubeconfig) &&
			strings.HasPrefix(p["example-banner"], "Applied"), nil
	}); err != nil {
		t.Fatalf("want the admin's rule Refused naming %s and the example Applied; rows:\n%s", exportpolicy.RuleKubeconfig, last)
	}
	cm, err := admin.CoreV1().ConfigMaps(localup.Workspace).Get(ctx, "makerun-leak-admin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range cm.Data {
		if k != "placeholder" || strings.Contains(v, "apiVersion") || strings.Contains(v, "clusters") {
			t.Errorf("the target holds %s: what the refused rule names reached it", k)
		}
	}
}
