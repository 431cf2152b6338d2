package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// statusServed reports whether Courier's discovery lists
// downstreamcopies/status, where the agents report (docs/design.md#pull-delivery).
func statusServed(t *testing.T) bool {
	return strings.Contains(kubectl(t, "get", "--raw", "/apis/courier.dev/v1alpha1"), `"name":"downstreamcopies/status"`)
}

// TestPullReports: a pulled Cluster's rows show what its agent reports --
// Synced, Conflict, Forbidden naming the ServiceAccount -- turn
// Unreachable within three report intervals of the agent stopping, saying
// so, and converge again once it is back.
func TestPullReports(t *testing.T) {
	// Courier serves the status subresource: without it an agent's reports
	// have nowhere to go and every pulled row would stay Pending, which is
	// a failure, not a reason to skip.
	if !statusServed(t) {
		t.Fatal("/apis/courier.dev/v1alpha1 does not list downstreamcopies/status: a pulled Cluster's agent cannot report its rows")
	}
	const user, interval = "courier-agent-reports", 2 * time.Second
	w := pullWorkspace(t, "ws-pull-reports", user)
	dest, saDest := "pull-reports", "pull-reports-sa"
	serviceAccountIn(t, pulled, "reports-deployer", saDest)
	ctx := context.Background()
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dest, Name: "taken"}}
	if _, err := downstream(t, pulled).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := downstream(t, pulled).CoreV1().ConfigMaps(dest).Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken"}, Data: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: resources("Secret/s", "ConfigMap/taken")}))
	w.apply(helmOp("sa", fleet.BundleDeploymentOptions{DefaultNamespace: saDest, ServiceAccount: "reports-deployer", DownstreamResources: resources("Secret/s")}))
	agent := startAgent(t, w, user, "--report-interval="+interval.String())

	w.waitRows(metav1.ListOptions{}, "edge/ConfigMap/taken@"+dest+"=Conflict", "edge/Secret/s@"+dest+"=Synced", "edge/Secret/s@"+saDest+"=Forbidden")
	if msg := w.messages(); !strings.Contains(msg, "ServiceAccount "+agentNamespace+"/reports-deployer") {
		t.Errorf("the Forbidden row does not name the ServiceAccount:\n%s", msg)
	}

	agent.Stop()
	start := time.Now()
	w.waitMessage("Unreachable", "agent")
	if took := time.Since(start); took > 3*interval+5*time.Second {
		t.Errorf("rows turned Unreachable after %s, want within three intervals (%s)", took, 3*interval)
	}

	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := agent.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := w.rows(ctx, metav1.ListOptions{})
		return err == nil && strings.Contains(strings.Join(got, ","), "edge/Secret/s@"+dest+"=Synced"), nil
	})
	if err != nil {
		t.Errorf("rows did not converge after the agent came back:\n%s", w.messages())
	}
}
