package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

	metrics := scrape(t)
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
	for where, text := range map[string]string{"/metrics": metrics, "Events": events, "downstreamcopies": rows, "Courier's log": string(logBytes)} {
		for _, form := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))} {
			if strings.Contains(text, form) {
				t.Errorf("the canary secret value appears in %s", where)
			}
		}
	}
}
