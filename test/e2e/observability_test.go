package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/test/localenv"
)

// scrape returns Courier's /metrics, read directly from its port.
func scrape(t *testing.T) string {
	t.Helper()
	return scrapeFrom(t, courier)
}

// scrapeFrom returns one Courier process's /metrics.
func scrapeFrom(t *testing.T, c *localenv.Courier) string {
	t.Helper()
	client, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(c.Config.Host + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// TestMetricsEventsAndNoLeaks copies a Secret holding a random canary value
// and checks the engine's metrics and the HelmOp's Events, and that the
// canary (plain, base64 or hex) appears in none of /metrics, Events, the
// downstreamcopies objects or Courier's log.
func TestMetricsEventsAndNoLeaks(t *testing.T) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	canary := hex.EncodeToString(raw)
	w := newWorkspace(t, "ws-observe", nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "canary"}, StringData: map[string]string{"token": canary}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: "observe-dest", DownstreamResources: resources("Secret/canary")}))
	waitSecret(t, 0, "observe-dest", "canary", 10*time.Second, "copied", secretData("token", canary))

	// The cluster's gauge is set once its pass has also swept, just after
	// the copy lands: wait for it.
	var metrics string
	eventually(t, "the cluster's reachable gauge", func() (bool, string) {
		metrics = scrape(t)
		return strings.Contains(metrics, "courier_cluster_reachable{cluster=\""+w.ns+"/c1\"} 1"), "not in /metrics yet"
	})
	for _, want := range []string{
		`courier_copies_total{reason="Created",result="written"}`,
		"courier_copy_propagation_seconds_bucket",
		"courier_cluster_reachable{cluster=\"" + w.ns + "/c1\"} 1",
		`workqueue_depth{name="courier_clusters"}`,
		"apiserver_request_total", // the generic server's own metrics
		`leader_election_master_status{name="courier"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	var events string
	eventually(t, "a Copied Event on the HelmOp", func() (bool, string) {
		list, err := w.c.kube.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=HelmOp,involvedObject.name=app"})
		if err != nil {
			return false, err.Error()
		}
		var b strings.Builder
		for _, e := range list.Items {
			b.WriteString(e.Reason + ": " + e.Message + "\n")
		}
		events = b.String()
		return strings.Contains(events, "Copied: Secret canary copied to observe-dest/canary in cluster c1"), events
	})

	rows := kubectl(t, "get", "dcp", "-n", w.ns, "-o", "yaml")
	logBytes, err := os.ReadFile(courier.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	// Positive controls: each text covers this copy, and the search finds
	// the canary where it is meant to be (the copy's own data, base64).
	for where, text := range map[string]string{"/metrics": metrics, "Events": events, "downstreamcopies": rows, "Courier's log": string(logBytes)} {
		if want := map[string]string{"/metrics": w.ns + "/c1", "Events": "observe-dest/canary", "downstreamcopies": "name: canary",
			"Courier's log": `object="observe-dest/canary"`}[where]; !strings.Contains(text, want) {
			t.Errorf("%s does not mention this copy (%q): the leak check below would prove nothing", where, want)
		}
	}
	copyYAML, err := env.Kubectl(context.Background(), env.Downstreams[0], "get", "secret", "-n", "observe-dest", "canary", "-o", "yaml")
	if err != nil || !strings.Contains(copyYAML, base64.StdEncoding.EncodeToString([]byte(canary))) {
		t.Errorf("the downstream copy's YAML does not hold the canary in base64 (err %v): the search is broken", err)
	}
	for where, text := range map[string]string{"/metrics": metrics, "Events": events, "downstreamcopies": rows, "Courier's log": string(logBytes)} {
		for _, form := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))} {
			if strings.Contains(text, form) {
				t.Errorf("the canary secret value appears in %s", where)
			}
		}
	}
}

// TestMetricsAuthorization: /metrics is authorized like the API, so a
// scraper needs courier:metrics-reader (artifacts/rbac/metrics-reader.yaml);
// the probes' /readyz and /livez need nothing.
func TestMetricsAuthorization(t *testing.T) {
	ctx := context.Background()
	_, userCfg, err := env.UserKubeconfig(env.Upstream, "e2e-prometheus")
	if err != nil {
		t.Fatal(err)
	}
	// The user's client certificate, sent straight to Courier.
	cfg := rest.CopyConfig(userCfg)
	cfg.Host = courier.Config.Host
	cfg.TLSClientConfig.CAData = courier.Config.CAData
	user, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	anonCfg := &rest.Config{Host: courier.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: courier.Config.CAData}}
	anon, err := rest.HTTPClientFor(anonCfg)
	if err != nil {
		t.Fatal(err)
	}
	status := func(c *http.Client, path string) int {
		resp, err := c.Get(courier.Config.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/readyz", "/livez"} {
		if got := status(anon, p); got != http.StatusOK {
			t.Errorf("anonymous %s: %d, want 200 (the kubelet probes it)", p, got)
		}
	}
	// Readiness waits until the aggregator is trusted: before that, a
	// request it proxies would be served as system:anonymous.
	resp, err := anon.Get(courier.Config.Host + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "[+]courier-front-proxy-trusted ok") {
		t.Errorf("/readyz?verbose has no passing courier-front-proxy-trusted check:\n%s", body)
	}
	if got := status(anon, "/metrics"); got != http.StatusForbidden {
		t.Errorf("anonymous /metrics: %d, want 403", got)
	}
	if got := status(user, "/metrics"); got != http.StatusForbidden {
		t.Errorf("/metrics without courier:metrics-reader: %d, want 403", got)
	}
	kube := upstreamClients(t).kube
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-prometheus-courier-metrics"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "e2e-prometheus"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "courier:metrics-reader"},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	// Courier caches authorization answers for a few seconds.
	eventually(t, "/metrics with courier:metrics-reader", func() (bool, string) {
		got := status(user, "/metrics")
		return got == http.StatusOK, fmt.Sprintf("status %d", got)
	})
}
