package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/test/fleetsim"
)

// courierWrites returns the writes Courier made to downstream cluster i,
// from that kube-apiserver's audit log (which records every write), as
// "verb resource ns/name" strings.
func courierWrites(t *testing.T, i int) []string {
	t.Helper()
	var out []string
	for _, w := range courierWritesAs(t, i) {
		out = append(out, strings.SplitN(w, " as ", 2)[0])
	}
	return out
}

// courierWritesAs is courierWrites with " as <user>" appended: the
// impersonated user when Courier wrote as a ServiceAccount.
func courierWritesAs(t *testing.T, i int) []string {
	t.Helper()
	return courierAuditWrites(t, i, false)
}

// courierAuditWrites reads Courier's writes from downstream cluster i's
// audit log; accepted keeps only those the kube-apiserver carried out
// (not refused with a 409 conflict, say).
func courierAuditWrites(t *testing.T, i int, accepted bool) []string {
	t.Helper()
	writes, err := fleetsim.CourierWrites(env.Downstreams[i].AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range writes {
		if !accepted || w.Accepted() {
			out = append(out, w.String())
		}
	}
	return out
}

// restartCourier stops Courier, runs between (if any), and starts it again,
// waiting until its APIService is Available.
func restartCourier(t *testing.T, between func()) {
	t.Helper()
	courier.Stop()
	if between != nil {
		between()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := courier.Start(ctx); err != nil {
		t.Fatalf("restarting Courier: %v", err)
	}
}

// TestRestartWritesNothingWhenInSync restarts Courier with every copy
// current and counts the writes that reach the downstream clusters: none.
func TestRestartWritesNothingWhenInSync(t *testing.T) {
	w := newWorkspace(t, "ws-restart", nil, nil)
	w.apply(selectAll("default"))
	dest := "restart-dest"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Data: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s", "ConfigMap/m")}))
	all := []string{"c1/ConfigMap/m@" + dest + "=Synced", "c1/Secret/s@" + dest + "=Synced", "c2/ConfigMap/m@" + dest + "=Synced", "c2/Secret/s@" + dest + "=Synced"}
	w.waitRows(metav1.ListOptions{}, all...)
	// Only writes into dest count below, so other tests' removals do not
	// disturb the baseline.
	before := [][]string{courierWrites(t, 0), courierWrites(t, 1)}
	wroteHere := false
	for _, w := range before[0] {
		wroteHere = wroteHere || strings.Contains(w, " "+dest+"/")
	}
	if !wroteHere {
		t.Fatalf("the audit log shows no write by Courier into %s: the count below would prove nothing", dest)
	}

	restartCourier(t, nil)
	// A row is Synced again only once the restarted engine's pass has
	// planned its copy, and a pass writes before it records Synced; the
	// audit log records a write before the response reaches Courier. So
	// every write this restart caused is in the log by now.
	w.waitRows(metav1.ListOptions{}, all...)
	// Only this test's objects count: other tests' workspaces are still
	// being cleaned up (and swept) while this one runs.
	for i := range env.Downstreams {
		var extra []string
		for _, w := range courierWrites(t, i)[len(before[i]):] {
			if strings.Contains(w, " "+dest+"/") || strings.HasSuffix(w, " /"+dest) {
				extra = append(extra, w)
			}
		}
		if len(extra) != 0 {
			t.Errorf("downstream-%d: Courier wrote after a restart with everything in sync: %q", i+1, extra)
		}
	}
}

// TestSweepAfterDowntime deletes a HelmOp while Courier is stopped; once it
// is back, the copies are removed.
func TestSweepAfterDowntime(t *testing.T) {
	w := newWorkspace(t, "ws-downtime", nil)
	w.apply(selectAll("default"))
	dest := "downtime-dest"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")}))
	waitSecret(t, 0, dest, "s", 10*time.Second, "copied", secretData("k", "v"))

	restartCourier(t, func() {
		if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	waitSecret(t, 0, dest, "s", 20*time.Second, "removed by the sweep after the restart", absentSecret)
}
