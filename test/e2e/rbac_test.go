package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// TestAuthorization checks that Courier delegates authorization to the
// upstream kube-apiserver: no RBAC means 403, a Role in one namespace shows
// that namespace only, and anonymous requests are refused.
func TestAuthorization(t *testing.T) {
	w := newWorkspace(t, "ws-rbac", nil)
	w.apply(selectAll("default"))
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/s")}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@default=SourceMissing")
	ctx := context.Background()

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "dcp-reader", Namespace: w.ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"courier.dev"}, Resources: []string{"downstreamcopies"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := w.c.kube.RbacV1().Roles(w.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-dcp-reader", Namespace: w.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "dcp-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "alice"}},
	}
	if _, err := w.c.kube.RbacV1().RoleBindings(w.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	userClient := func(user string) versioned.Interface {
		_, cfg, err := env.UserKubeconfig(env.Upstream, user)
		if err != nil {
			t.Fatal(err)
		}
		c, err := versioned.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("no RBAC: forbidden", func(t *testing.T) {
		_, err := userClient("nobody").CourierV1alpha1().DownstreamCopies("").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("expected 403 Forbidden, got %v", err)
		}
	})
	t.Run("a Role in one namespace shows that namespace only", func(t *testing.T) {
		alice := userClient("alice")
		eventually(t, "alice lists her namespace", func() (bool, string) {
			list, err := alice.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 1, fmt.Sprintf("%d rows", len(list.Items))
		})
		if _, err := alice.CourierV1alpha1().DownstreamCopies("fleet-default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("other namespace: expected 403, got %v", err)
		}
		if _, err := alice.CourierV1alpha1().DownstreamCopies("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("all namespaces: expected 403, got %v", err)
		}
	})
	t.Run("anonymous requests are refused", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(courier.CABundle)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		for _, url := range []string{
			fmt.Sprintf("https://127.0.0.1:%d/apis/courier.dev/v1alpha1/downstreamcopies", courier.Port),
			fmt.Sprintf("https://127.0.0.1:%d/apis/courier.dev/v1alpha1/namespaces/%s/downstreamcopies", courier.Port, w.ns),
		} {
			resp, err := client.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s without credentials: %d, want 401 or 403", url, resp.StatusCode)
			}
		}
		// Plain HTTP is not served.
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", courier.Port)); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("plain HTTP answered %d", resp.StatusCode)
			}
		}
	})
}

// TestAggregatedViewRole binds a user to the built-in view ClusterRole in
// one namespace: Courier's aggregated rules let them list downstreamcopies
// and read downstreamcopysummaries there, and view still does not let them
// read Secrets.
func TestAggregatedViewRole(t *testing.T) {
	w := newWorkspace(t, "ws-view", nil)
	w.apply(selectAll("default"))
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/s")}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@default=SourceMissing")
	ctx := context.Background()
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer", Namespace: w.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "viewer"}},
	}
	if _, err := w.c.kube.RbacV1().RoleBindings(w.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, cfg, err := env.UserKubeconfig(env.Upstream, "viewer")
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "viewer lists downstreamcopies through the aggregated view role", func() (bool, string) {
		list, err := viewer.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 1, fmt.Sprintf("%d rows", len(list.Items))
	})
	eventually(t, "viewer reads the HelmOp's downstreamcopysummary through the aggregated view role", func() (bool, string) {
		s, err := viewer.CourierV1alpha1().DownstreamCopySummaries(w.ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return s.Status.Copies == 1, fmt.Sprintf("%+v", s.Status)
	})
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(w.ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("view lets the user list Secrets: %v", err)
	}
}

// TestArtifactsApplyServerSide checks that the shipped manifests are valid
// for a real kube-apiserver: everything under artifacts/ except the Helm
// charts, whose templates are not manifests (install_test.go renders them),
// and krew's plugin manifest, which is for krew's index, not a cluster
// (hack/image fills it in and its tests check it).
func TestArtifactsApplyServerSide(t *testing.T) {
	// The namespaces the manifests expect to exist (Fleet makes them).
	for _, ns := range []string{"fleet-default", "cattle-fleet-system"} {
		_, _ = env.Kubectl(context.Background(), env.Upstream, "create", "namespace", ns)
	}
	entries, err := os.ReadDir(repoRoot + "/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"apply", "--dry-run=server", "-R"}
	for _, e := range entries {
		// Helm charts (the server's and the agent's) hold templates, not
		// manifests: install_test.go and pull_install_test.go render them.
		if _, err := os.Stat(repoRoot + "/artifacts/" + e.Name() + "/Chart.yaml"); err == nil || e.Name() == "krew" {
			continue
		}
		args = append(args, "-f", repoRoot+"/artifacts/"+e.Name())
	}
	out := kubectl(t, args...)
	for _, want := range []string{"apiservice.apiregistration.k8s.io/v1alpha1.courier.dev", "clusterrole.rbac.authorization.k8s.io/courier:aggregate-to-view", "helmop.fleet.cattle.io/example",
		"deployment.apps/courier", "poddisruptionbudget.policy/courier", "role.rbac.authorization.k8s.io/courier:leader-election",
		"prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/courier-agents", "flowschema.flowcontrol.apiserver.k8s.io/courier-agents"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply --dry-run=server output lacks %s:\n%s", want, out)
		}
	}
}
