package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	courierapi "github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// agentUser is the upstream identity of a test agent: a client
// certificate from the upstream CA, a kubeconfig for kubectl, and clients.
type agentUser struct {
	name       string
	kubeconfig string
	courier    versioned.Interface
}

func newAgentUser(t *testing.T, name string, groups ...string) agentUser {
	t.Helper()
	path, cfg, err := env.UserKubeconfig(env.Upstream, name, groups...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return agentUser{name: name, kubeconfig: path, courier: c}
}

// payload GETs downstreamcopies/<row>/payload through the aggregator.
func (u agentUser) payload(ctx context.Context, ns, row string) ([]byte, error) {
	return getPayload(ctx, u.courier, ns, row)
}

// getPayload returns the body, or the API error decoded from the Status
// (Raw and DoRaw alone do not decode it).
func getPayload(ctx context.Context, c versioned.Interface, ns, row string) ([]byte, error) {
	res := c.CourierV1alpha1().RESTClient().Get().Namespace(ns).Resource("downstreamcopies").Name(row).SubResource("payload").Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// kubectl runs the real kubectl as this user.
func (u agentUser) kubectl(ctx context.Context, args ...string) (string, error) {
	cache := filepath.Join(filepath.Dir(u.kubeconfig), "kubectl-cache-"+u.name)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig=" + u.kubeconfig, "--cache-dir=" + cache}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// pulledWorkspace makes a workspace with two pulled Clusters, edge1 and
// edge2, each annotated with its agent's user and without a kubeconfig
// Secret (nothing pushes to them), and a HelmOp copying a Secret, a
// ConfigMap, a Secret that does not exist and a Deployment to both.
func pulledWorkspace(t *testing.T, name string) *workspace {
	w := newWorkspace(t, name)
	for _, c := range []string{"edge1", "edge2"} {
		w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: c,
			Annotations: map[string]string{courierapi.AnnotationAgentUser: "courier-agent-" + c}}})
	}
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: map[string]string{"app": "web"}},
		Data: map[string][]byte{"password": []byte(secretValue)}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "pulled"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DefaultNamespace: "apps",
		DownstreamResources: resources("Secret/db", "ConfigMap/settings", "Secret/absent", "Deployment/web")}))
	eventually(t, "eight rows", func() (bool, string) {
		list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 8, w.messages()
	})
	return w
}

// bind binds the ClusterRole role to user in the workspace.
func (w *workspace) bind(role, user string) {
	w.t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + user, Namespace: w.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := w.c.kube.RbacV1().RoleBindings(w.ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// forbiddenBy checks that err is a 403 whose message says why (Courier's
// reason, so the refusal came from Courier's authorizer and not only from
// the upstream RBAC).
func forbiddenBy(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want 403 Forbidden, got %v", what, err)
	} else if !strings.Contains(err.Error(), reason) {
		t.Errorf("%s: 403 %q does not say %q", what, err, reason)
	}
}

// TestAgentPullServer is the server side of pull delivery (docs/design.md#pull-delivery)
// through the real aggregator: a Cluster's agent, bound to courier:agent
// upstream, lists and watches its Cluster's rows and reads their payloads;
// Courier's authorizer refuses it everything else, and refuses payloads to
// everyone else, the upstream's system:masters admin included.
func TestAgentPullServer(t *testing.T) {
	w := pulledWorkspace(t, "ws-agent")
	ctx := context.Background()
	w.bind("courier:agent", "courier-agent-edge1")
	w.bind("courier:agent", "courier-agent-edge2")
	w.bind("admin", "ws-admin")
	w.bind("courier:agent", "not-an-agent") // RBAC grants all an agent has; Courier does not
	agent := newAgentUser(t, "courier-agent-edge1")

	t.Run("the agent lists and watches its rows with its selector", func(t *testing.T) { agentListsItsRows(ctx, t, w, agent) })
	t.Run("the agent reads payloads equal to their sources", func(t *testing.T) { agentReadsPayloads(ctx, t, w, agent) })
	t.Run("rows with nothing to write say why", func(t *testing.T) {
		_, err := agent.payload(ctx, w.ns, "app.edge1.secret.absent")
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("SourceMissing row: %v, want 404 saying the source does not exist", err)
		}
		_, err = agent.payload(ctx, w.ns, "app.edge1.deployment.web")
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "Invalid") {
			t.Errorf("Invalid row: %v, want 409 naming the phase", err)
		}
	})
	t.Run("discovery lists the payload subresource", func(t *testing.T) {
		out := kubectl(t, "get", "--raw", "/apis/courier.dev/v1alpha1")
		if !strings.Contains(out, `"name":"downstreamcopies/payload"`) {
			t.Errorf("discovery lacks downstreamcopies/payload:\n%s", out)
		}
	})
	t.Run("the agent beyond its rows is refused", func(t *testing.T) { agentBeyondItsRows(ctx, t, w, agent) })
	t.Run("payloads are refused to everyone else", func(t *testing.T) { othersReadPayload(ctx, t, w) })
	t.Run("payloads reach no log, Event or row", func(t *testing.T) { payloadsLeakNowhere(ctx, t, w) })
}

// payloadsLeakNowhere looks for the Secret's value, plain and in base64,
// in Courier's log (at -v=2), the workspace's Events and its rows, after
// the payload reads above.
func payloadsLeakNowhere(ctx context.Context, t *testing.T, w *workspace) {
	var places []string
	logBytes, err := os.ReadFile(courier.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	places = append(places, string(logBytes))
	events, err := w.c.kube.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []any{events, rows} {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		places = append(places, string(b))
	}
	for i, where := range []string{"Courier's log", "the Events", "the rows"} {
		for _, leak := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))} {
			if strings.Contains(places[i], leak) {
				t.Errorf("the Secret's value appears in %s", where)
			}
		}
	}
}

const (
	secretRow, configMapRow = "app.edge1.secret.db", "app.edge1.configmap.settings"
	// secretValue is the source Secret's data: it must reach the agent's
	// payload and nothing else.
	secretValue = "pull-e2e-secret-value"
)

// mine is the agent of edge1's selector.
var mine = metav1.ListOptions{FieldSelector: "spec.cluster=edge1"}

func agentListsItsRows(ctx context.Context, t *testing.T, w *workspace, agent agentUser) {
	var names []string
	eventually(t, "the agent lists its rows", func() (bool, string) {
		list, err := agent.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, mine)
		if err != nil {
			return false, err.Error()
		}
		names = names[:0]
		for _, r := range list.Items {
			names = append(names, r.Name)
		}
		return len(names) == 4, fmt.Sprint(names)
	})
	out, err := agent.kubectl(ctx, "get", "downstreamcopies", "-n", w.ns, "--field-selector", "spec.cluster=edge1", "-o", "name")
	if err != nil || strings.Count(out, "downstreamcopy.courier.dev/") != 4 || strings.Contains(out, "edge2") {
		t.Errorf("kubectl get as the agent: %v\n%s", err, out)
	}

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wi, err := agent.courier.CourierV1alpha1().DownstreamCopies(w.ns).Watch(wctx, mine)
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	seen := map[string]bool{}
	for len(seen) < 4 {
		ev, ok := <-wi.ResultChan()
		if !ok {
			t.Fatalf("watch ended after %v", seen)
		}
		if ev.Type != watch.Added {
			continue
		}
		row := ev.Object.(interface{ GetName() string }).GetName()
		if !strings.Contains(row, ".edge1.") {
			t.Errorf("the agent of edge1 saw %s", row)
		}
		seen[row] = true
	}
}

func agentReadsPayloads(ctx context.Context, t *testing.T, w *workspace, agent agentUser) {
	body, err := agent.payload(ctx, w.ns, secretRow)
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	src, err := w.c.kube.CoreV1().Secrets(w.ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != "Secret" || s.APIVersion != "v1" || s.Namespace != "apps" || s.Name != "db" || !reflect.DeepEqual(s.Data, src.Data) || s.Type != src.Type {
		t.Errorf("payload %s/%s %s %s type %s, want apps/db v1 Secret with the source's type and data", s.Namespace, s.Name, s.APIVersion, s.Kind, s.Type)
	}
	for k, v := range map[string]string{"app": "web", "courier.dev/managed-by": "courier"} {
		if s.Labels[k] != v {
			t.Errorf("payload label %s=%q, want %q", k, s.Labels[k], v)
		}
	}
	for k, v := range map[string]string{"courier.dev/helmop": w.ns + "/app", "courier.dev/source-resource-version": src.ResourceVersion} {
		if s.Annotations[k] != v {
			t.Errorf("payload annotation %s=%q, want %q", k, s.Annotations[k], v)
		}
	}
	if s.Labels["courier.dev/cluster-hash"] == "" {
		t.Errorf("payload labels %v lack courier.dev/cluster-hash, which names the Cluster", s.Labels)
	}
	out, err := agent.kubectl(ctx, "get", "--raw", "/apis/courier.dev/v1alpha1/namespaces/"+w.ns+"/downstreamcopies/"+configMapRow+"/payload")
	var cm corev1.ConfigMap
	if err == nil {
		err = json.Unmarshal([]byte(out), &cm)
	}
	if err != nil || cm.Kind != "ConfigMap" || cm.Data["mode"] != "pulled" {
		t.Errorf("kubectl get --raw of a ConfigMap payload: %v\n%s", err, out)
	}
}

func agentBeyondItsRows(ctx context.Context, t *testing.T, w *workspace, agent agentUser) {
	_, err := agent.payload(ctx, w.ns, "app.edge2.secret.db")
	forbiddenBy(t, "another Cluster's payload", err, "is not a row of its Cluster")
	_, err = agent.courier.CourierV1alpha1().DownstreamCopies(w.ns).Get(ctx, "app.edge2.secret.db", metav1.GetOptions{})
	forbiddenBy(t, "another Cluster's row", err, "is not a row of its Cluster")
	for _, opts := range []metav1.ListOptions{{}, {FieldSelector: "spec.cluster=edge2"}, {FieldSelector: "status.phase=Unreachable"}, {LabelSelector: "courier.dev/cluster=edge1"}} {
		_, err := agent.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, opts)
		forbiddenBy(t, fmt.Sprintf("list with %+v", opts), err, "fieldSelector spec.cluster=<its Cluster>")
		_, err = agent.courier.CourierV1alpha1().DownstreamCopies(w.ns).Watch(ctx, opts)
		forbiddenBy(t, fmt.Sprintf("watch with %+v", opts), err, "fieldSelector spec.cluster=<its Cluster>")
	}
	_, err = agent.courier.CourierV1alpha1().FieldCopies(w.ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("fieldcopies: want 403, got %v", err)
	}
}

func othersReadPayload(ctx context.Context, t *testing.T, w *workspace) {
	_, err := newAgentUser(t, "courier-agent-edge2").payload(ctx, w.ns, secretRow)
	forbiddenBy(t, "edge2's agent reading edge1's payload", err, "is not a row of its Cluster")
	_, err = newAgentUser(t, "not-an-agent").payload(ctx, w.ns, secretRow)
	forbiddenBy(t, "a user RBAC lets read payloads", err, "payloads are served only to the agent")
	_, err = newAgentUser(t, "ws-admin").payload(ctx, w.ns, secretRow)
	if !apierrors.IsForbidden(err) {
		t.Errorf("a workspace admin: want 403, got %v", err)
	}
	admin, err := versioned.NewForConfig(env.Upstream.Config) // system:masters
	if err != nil {
		t.Fatal(err)
	}
	_, err = getPayload(ctx, admin, w.ns, secretRow)
	forbiddenBy(t, "the cluster admin (system:masters)", err, "payloads are served only to the agent")
	anonymousPayload(ctx, t, w.ns, secretRow)
}

// anonymousPayload checks that a payload request without credentials is
// refused, through the aggregator and straight at Courier.
func anonymousPayload(ctx context.Context, t *testing.T, ns, row string) {
	t.Helper()
	anon := rest.AnonymousClientConfig(env.Upstream.Config)
	c, err := versioned.NewForConfig(anon)
	if err != nil {
		t.Fatal(err)
	}
	_, err = getPayload(ctx, c, ns, row)
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Errorf("anonymous through the aggregator: want 401 or 403, got %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(courier.CABundle)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/apis/courier.dev/v1alpha1/namespaces/%s/downstreamcopies/%s/payload", courier.Port, ns, row))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), secretValue) {
		t.Errorf("anonymous straight at Courier: %d %s", resp.StatusCode, body)
	}
}
