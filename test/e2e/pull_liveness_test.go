package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/liveness"
	"github.com/courier-dev/courier/pkg/rowstatus"
	"github.com/courier-dev/courier/test/localenv"
)

// TestPullLiveness is docs/design.md#scale-out's "status on change, liveness apart"
// against the real servers and a real courier-agent: with everything
// current, the agent's heartbeats write nothing to its Cluster's report
// and a bounded number of digest writes; a stopped agent's rows turn
// Unreachable within three intervals; its heartbeats are allowed without
// asking the upstream each time; a restarted Courier shows the last
// status at once and, reading the digests, does not show the Cluster
// Unreachable for not having heard it yet.
func TestPullLiveness(t *testing.T) {
	const user, interval = "courier-agent-liveness", 2 * time.Second
	w := pullWorkspace(t, "ws-pull-liveness", user)
	dest := "pull-liveness"
	ctx := context.Background()
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Data: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: resources("Secret/s", "ConfigMap/m")}))
	agent := startAgent(t, w, user, "--report-interval="+interval.String())
	synced := []string{"edge/ConfigMap/m@" + dest + "=Synced", "edge/Secret/s@" + dest + "=Synced"}
	w.waitRows(metav1.ListOptions{}, synced...)
	cluster := types.NamespacedName{Namespace: w.ns, Name: "edge"}

	t.Run("heartbeats write no report and a bounded number of digests", func(t *testing.T) {
		time.Sleep(2 * interval) // the first reports' writes land
		const window = 20 * time.Second
		before, hitsBefore := statusWrites(t), metricValue(scrape(t), `courier_agent_authorization_cache_total{result="hit"}`)
		reports, digests, last := countWrites(ctx, t, cluster, window)
		after, hitsAfter := statusWrites(t), metricValue(scrape(t), `courier_agent_authorization_cache_total{result="hit"}`)
		// One replica rewrites the digest holding edge when its record
		// is two intervals old: every 4 s, 5 in 20 s, 7 with the edges of
		// the window.
		const bound = int(window/(2*interval)) + 2
		t.Logf("in %s with a %s agent and everything current: %d writes of the report, %d of the digest holding the Cluster (bound %d)",
			window, interval, reports, digests, bound)
		// Courier's own count agrees (other tests' Clusters are gone or
		// silent: their records never fall due).
		t.Logf("courier_agent_status_writes_total in the window: report %g, digest %g", after["report"]-before["report"], after["digest"]-before["digest"])
		if after["report"] != before["report"] || after["digest"]-before["digest"] < float64(digests) {
			t.Errorf("courier_agent_status_writes_total: before %v, after %v; the watch saw %d report and %d digest writes", before, after, reports, digests)
		}
		if reports != 0 {
			t.Errorf("%d writes of the report ConfigMap with nothing changing, want 0", reports)
		}
		// Each heartbeat is allowed from the agent's remembered answer,
		// not by a SubjectAccessReview of its own (pkg/agentauth/allowcache.go):
		// at least one heartbeat per interval hits the cache.
		t.Logf("agent requests allowed from the cache in the window: %g", hitsAfter-hitsBefore)
		if hitsAfter-hitsBefore < float64(window/interval)/2 {
			t.Errorf("%g agent requests allowed from the cache in %s of heartbeats every %s, want at least %d", hitsAfter-hitsBefore, window, interval, int(window/interval)/2)
		}
		if digests == 0 || digests > bound {
			t.Errorf("%d digest writes in %s, want 1..%d", digests, window, bound)
		}
		if age := time.Since(last); age > 2*interval+2*time.Second {
			t.Errorf("the newest digest record of the Cluster is %s old: the agent was not heard", age)
		}
	})

	t.Run("a stopped agent's rows turn Unreachable within three intervals", func(t *testing.T) {
		agent.Stop()
		start := time.Now()
		w.waitMessage("Unreachable", "agent")
		took := time.Since(start)
		t.Logf("Unreachable %s after the agent stopped", took)
		if took > 3*interval+5*time.Second {
			t.Errorf("rows turned Unreachable after %s, want within three intervals (%s)", took, 3*interval)
		}
	})

	t.Run("a restarted Courier keeps the status and the Cluster reachable", func(t *testing.T) {
		// An agent unheard for three intervals is Unreachable by rule, and
		// a Courier restart here takes up to ~45 s (its HTTP server waits
		// for the agent's watch connection until localenv's 40 s SIGKILL),
		// longer than three 2 s or 10 s intervals: with 60 s intervals a
		// restart is no such gap. The agent's first report carries the new
		// interval, which writes the digest at once.
		const slow = 60 * time.Second
		startAgent(t, w, user, "--report-interval="+slow.String())
		w.waitRows(metav1.ListOptions{}, synced...)
		time.Sleep(3 * time.Second)
		stopped := time.Now()
		restartCourier(t, nil)
		t.Logf("Courier was away for %s", time.Since(stopped))
		// The report was last written when the statuses changed, with the
		// 2 s agent: its own heartbeat has run out, so only the digests can
		// keep the Cluster reachable below.
		if hb := reportHeartbeat(ctx, t, cluster); time.Now().Before(hb.LastHeard.Add(rowstatus.MissedIntervals * hb.Interval.Duration)) {
			t.Errorf("the report's heartbeat (%s, every %s) is fresh: heartbeats rewrote the report", hb.LastHeard.UTC().Format(time.RFC3339), hb.Interval.Duration)
		}
		// Courier is ready (its views synced): every answer from here on,
		// the first included, must hold both rows Synced. An empty list is
		// a wrong answer, not a missing one; only a failed request is
		// asked again, and at least one must succeed.
		answers := 0
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			got, err := w.rows(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if strings.Join(got, ",") != strings.Join(synced, ",") {
				t.Fatalf("after the restart (answer %d): %v, want %v\n%s", answers+1, got, synced, w.messages())
			}
			answers++
			time.Sleep(500 * time.Millisecond)
		}
		if answers == 0 {
			t.Fatal("no list of the rows answered within 30 s of the restart")
		}
	})
}

// countWrites watches, for window, the report ConfigMap of cluster and
// the digests, and returns how many writes each had (digests: those that
// hold cluster) and the newest digest record of cluster at the end.
func countWrites(ctx context.Context, t *testing.T, cluster types.NamespacedName, window time.Duration) (reports, digests int, last time.Time) {
	t.Helper()
	cms := upstreamClients(t).kube.CoreV1().ConfigMaps(localenv.DefaultCourierNamespace)
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	wi, err := cms.Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	reportName, line := clusterstatus.ObjectName(cluster), cluster.String()+" "
	for ev := range wi.ResultChan() {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
			continue
		}
		switch {
		case cm.Name == reportName:
			reports++
			t.Logf("report written: %v", cm.Data)
		case cm.Labels[liveness.Label] == "true" && strings.Contains(cm.Data[liveness.DigestKey], line):
			digests++
			last = digestRecord(t, cm.Data[liveness.DigestKey], line)
		}
	}
	return reports, digests, last
}

// digestRecord returns the time a digest's line for a Cluster records.
func digestRecord(t *testing.T, data, prefix string) time.Time {
	for _, l := range strings.Split(data, "\n") {
		if strings.HasPrefix(l, prefix) {
			var ms, iv int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(l, prefix), "%d %d", &ms, &iv); err == nil {
				return time.UnixMilli(ms)
			}
		}
	}
	t.Errorf("no record %q in the digest:\n%s", prefix, data)
	return time.Time{}
}

// reportHeartbeat returns the heartbeat the report of cluster was last
// written with.
func reportHeartbeat(ctx context.Context, t *testing.T, cluster types.NamespacedName) clusterstatus.Heartbeat {
	t.Helper()
	cm, err := upstreamClients(t).kube.CoreV1().ConfigMaps(localenv.DefaultCourierNamespace).Get(ctx, clusterstatus.ObjectName(cluster), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hb clusterstatus.Heartbeat
	if err := json.Unmarshal([]byte(cm.Data[clusterstatus.HeartbeatKey]), &hb); err != nil {
		t.Fatalf("the report's heartbeat %q: %v", cm.Data[clusterstatus.HeartbeatKey], err)
	}
	return hb
}

var statusWritesLine = regexp.MustCompile(`(?m)^courier_agent_status_writes_total\{object="([a-z_]+)"\} (\S+)$`)

// statusWrites reads courier_agent_status_writes_total by object from the
// suite's Courier.
func statusWrites(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range statusWritesLine.FindAllStringSubmatch(scrape(t), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		out[m[1]] = v
	}
	return out
}
