package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// agentNamespace is where Courier looks up ServiceAccounts downstream
// (--agent-namespace, by default Fleet's own namespace).
const agentNamespace = fleet.SystemNamespace

// serviceAccountIn creates namespace ns (and the agent namespace) and a
// ServiceAccount with no rights in downstream cluster i.
func serviceAccountIn(t *testing.T, i int, name string, namespaces ...string) {
	t.Helper()
	ctx := context.Background()
	d := downstream(t, i)
	for _, ns := range append([]string{agentNamespace}, namespaces...) {
		if _, err := d.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if _, err := d.CoreV1().ServiceAccounts(agentNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// grant gives the ServiceAccount the verbs on resources in namespace ns of
// downstream cluster i (cluster-wide when ns is "").
func grant(t *testing.T, i int, sa, ns string, resources, verbs []string) {
	t.Helper()
	ctx := context.Background()
	d := downstream(t, i)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: verbs}}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: agentNamespace}}
	name := sa + "-" + strings.Join(resources, "-")
	if ns == "" {
		if _, err := d.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := d.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitMessage waits until every row of the workspace is in phase and its
// message holds each of subs.
func (w *workspace) waitMessage(phase string, subs ...string) {
	w.t.Helper()
	eventually(w.t, "rows "+phase+" with "+strings.Join(subs, ", "), func() (bool, string) {
		msg := w.messages()
		lines := strings.Split(strings.TrimSpace(msg), "\n")
		if len(lines) == 0 || msg == "" {
			return false, "no rows"
		}
		for _, l := range lines {
			if !strings.Contains(l, " "+phase+": ") {
				return false, msg
			}
			for _, s := range subs {
				if !strings.Contains(l, s) {
					return false, msg
				}
			}
		}
		return true, msg
	})
}

// TestServiceAccountForbidden is Fleet's case: copies are written as the
// HelmOp's ServiceAccount; without rights the rows say Forbidden and nothing
// is written; once a Role is granted the copies appear with no restart; and
// removal does not need the ServiceAccount's rights.
func TestServiceAccountForbidden(t *testing.T) {
	dest := "sa-dest"
	serviceAccountIn(t, 0, "deployer", dest)
	w := newWorkspace(t, "ws-sa", nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m1"}, Data: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, ServiceAccount: "deployer", DownstreamResources: resources("Secret/s1", "ConfigMap/m1")}))

	w.waitMessage("Forbidden", "forbidden", "ServiceAccount "+agentNamespace+"/deployer", "nothing was written")
	if out := kubectl(t, "get", "dcp", "-n", w.ns, "-o", "jsonpath={.items[0].spec.serviceAccount}"); out != agentNamespace+"/deployer" {
		t.Errorf("spec.serviceAccount = %q", out)
	}
	waitSecret(t, 0, dest, "s1", time.Second, "nothing written while forbidden", absentSecret)

	t.Run("forbidden on one of two resources leaves neither behind", func(t *testing.T) {
		w.t = t
		grant(t, 0, "deployer", dest, []string{"secrets"}, []string{"get", "create", "update"})
		w.waitMessage("Forbidden", "configmaps in namespace "+dest)
		stays(t, 3*time.Second, "the Secret is not written alone", func() bool {
			_, err := downstream(t, 0).CoreV1().Secrets(dest).Get(context.Background(), "s1", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})
	t.Run("granted: the copies appear without a restart, written as the ServiceAccount", func(t *testing.T) {
		w.t = t
		grant(t, 0, "deployer", dest, []string{"configmaps"}, []string{"get", "create", "update"})
		waitSecret(t, 0, dest, "s1", 60*time.Second, "copied once granted", secretData("k", "v"))
		w.waitRows(metav1.ListOptions{}, "c1/ConfigMap/m1@"+dest+"=Synced", "c1/Secret/s1@"+dest+"=Synced")
		found := false
		for _, wr := range courierWritesAs(t, 0) {
			if strings.HasPrefix(wr, "create secrets "+dest+"/s1 as system:serviceaccount:"+agentNamespace+":deployer") {
				found = true
			}
		}
		if !found {
			t.Errorf("the audit log shows no create of %s/s1 as the ServiceAccount: %q", dest, courierWritesAs(t, 0))
		}
	})
	t.Run("deleting the HelmOp removes the copies without the ServiceAccount's rights", func(t *testing.T) {
		if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSecret(t, 0, dest, "s1", 10*time.Second, "removed", absentSecret)
	})
}

// TestServiceAccountCannotCreateNamespace: the destination namespace is
// missing and the ServiceAccount may not create namespaces: nothing is
// written and the row names the namespace; once an operator creates it,
// the copies appear.
func TestServiceAccountCannotCreateNamespace(t *testing.T) {
	dest := "sa-missing-ns"
	serviceAccountIn(t, 0, "builder")
	grant(t, 0, "builder", "", []string{"secrets"}, []string{"get", "create", "update"})
	w := newWorkspace(t, "ws-sa-ns", nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, ServiceAccount: "builder", DownstreamResources: resources("Secret/s")}))
	w.waitMessage("Forbidden", "create the missing namespace "+dest, "ServiceAccount "+agentNamespace+"/builder")
	if _, err := downstream(t, 0).CoreV1().Namespaces().Get(context.Background(), dest, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s exists (err %v): something was written", dest, err)
	}
	if _, err := downstream(t, 0).CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, 0, dest, "s", 60*time.Second, "copied once the namespace exists", secretData("k", "v"))
}

// TestLeastPrivilegeDownstreamIdentity runs a Cluster whose kubeconfig
// authenticates as the ServiceAccount artifacts/downstream/rbac.yaml binds,
// and nothing more: copies are written (as the HelmOp's ServiceAccount),
// drift is watched, and removal works.
func TestLeastPrivilegeDownstreamIdentity(t *testing.T) {
	ctx := context.Background()
	ds := env.Downstreams[0]
	if _, err := env.Kubectl(ctx, ds, "apply", "-f", repoRoot+"/artifacts/downstream/rbac.yaml"); err != nil {
		t.Fatal(err)
	}
	token, err := env.Kubectl(ctx, ds, "create", "token", "courier", "-n", "courier-system", "--duration=1h")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: d, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: courier, user: {token: %q}}]
contexts: [{name: d, context: {cluster: d, user: courier}}]
current-context: d
`, ds.Config.Host, base64.StdEncoding.EncodeToString(ds.Config.CAData), strings.TrimSpace(token))

	dest := "least-dest"
	serviceAccountIn(t, 0, "limited", dest)
	grant(t, 0, "limited", dest, []string{"secrets"}, []string{"get", "create", "update"})
	w := newWorkspace(t, "ws-least", nil)
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c1-kubeconfig"}, Data: map[string][]byte{"value": []byte(kubeconfig)}})
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, ServiceAccount: "limited", DownstreamResources: resources("Secret/s")}))
	waitSecret(t, 0, dest, "s", 30*time.Second, "copied with the least-privilege identity", secretData("k", "v"))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced")

	if err := downstream(t, 0).CoreV1().Secrets(dest).Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, 0, dest, "s", 10*time.Second, "drift repaired", secretData("k", "v"))
	if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, 0, dest, "s", 10*time.Second, "removed", absentSecret)
}

// TestRequireServiceAccount restarts Courier with --require-service-account:
// a HelmOp naming no ServiceAccount (with no fleet-default downstream) gets
// a Forbidden row saying one is required, and nothing is written.
func TestRequireServiceAccount(t *testing.T) {
	dest := "require-dest"
	w := newWorkspace(t, "ws-require", nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})

	courier.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := courier.StartWith(ctx, []string{"--require-service-account"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Remove the HelmOp first, so Courier without the flag does not copy
		// it with its own identity while the workspace is being deleted.
		_ = fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(context.Background(), "app", metav1.DeleteOptions{})
		courier.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := courier.StartWith(ctx, nil); err != nil {
			t.Errorf("restarting Courier without the flag: %v", err)
		}
	})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")}))
	w.waitMessage("Forbidden", "a ServiceAccount is required (--require-service-account)")
	stays(t, 3*time.Second, "nothing is written", func() bool {
		_, err := downstream(t, 0).CoreV1().Namespaces().Get(context.Background(), dest, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
