package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	courierapi "github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/localenv"
)

// statusReport is what an agent sends to downstreamcopies/<row>/status.
type statusReport struct {
	phase    v1alpha1.CopyPhase
	message  string
	syncedRV string
	interval string
}

// putStatus sends a report for row as the user of c, with the generated
// client's UpdateStatus, as courier-agent does.
func putStatus(ctx context.Context, c versioned.Interface, ns, row string, r statusReport) error {
	now := metav1.Now()
	obj := &v1alpha1.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: row,
			Annotations: map[string]string{courierapi.AnnotationReportInterval: r.interval}},
		Status: v1alpha1.DownstreamCopyStatus{Phase: r.phase, Message: r.message, SyncedResourceVersion: r.syncedRV, LastSyncTime: &now},
	}
	_, err := c.CourierV1alpha1().DownstreamCopies(ns).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	return err
}

// wideLine is kubectl get -o wide's line for one row, as the upstream admin.
func wideLine(t *testing.T, ns, row string) string {
	t.Helper()
	out, err := env.Kubectl(context.Background(), env.Upstream, "get", "downstreamcopies", "-n", ns, row, "-o", "wide", "--no-headers")
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(out)
}

// waitWide waits until the row's -o wide line holds every one of want.
func waitWide(t *testing.T, ns, row string, want ...string) string {
	t.Helper()
	var line string
	eventually(t, fmt.Sprintf("kubectl get -o wide of %s shows %q", row, want), func() (bool, string) {
		line = wideLine(t, ns, row)
		for _, w := range want {
			if !strings.Contains(line, w) {
				return false, line
			}
		}
		return true, line
	})
	return line
}

// TestPullStatusReports is the status half of pull delivery (docs/design.md#pull-delivery)
// against the real servers: a pulled Cluster's agent reports its rows
// through the aggregator, the rows show the report, Courier keeps it
// upstream (across a restart, the same on two replicas), a silent agent's
// rows turn Unreachable and come back, and nobody else may report.
func TestPullStatusReports(t *testing.T) {
	w := pulledWorkspace(t, "ws-pull-status")
	ctx := context.Background()
	w.bind("courier:agent", "courier-agent-edge1")
	w.bind("courier:agent", "courier-agent-edge2")
	w.bind("admin", "ws-admin")
	agent := newAgentUser(t, "courier-agent-edge1")
	src, err := w.c.kube.CoreV1().Secrets(w.ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := src.ResourceVersion

	t.Run("before any report the row waits for the agent", func(t *testing.T) {
		waitWide(t, w.ns, secretRow, "Pending", "waiting for the courier-agent courier-agent-edge1 of Cluster "+w.ns+"/edge1 to report")
	})
	t.Run("the agent's report shows on kubectl get -o wide", func(t *testing.T) {
		if err := putStatus(ctx, agent.courier, w.ns, secretRow, statusReport{v1alpha1.CopyPhaseSynced, "copied by the agent", rv, "5m"}); err != nil {
			t.Fatal(err)
		}
		waitWide(t, w.ns, secretRow, "Synced", "copied by the agent", rv)
		// The rows of edge2, whose agent has not reported, still wait.
		waitWide(t, w.ns, "app.edge2.secret.db", "Pending", "courier-agent-edge2")
	})
	t.Run("the report is one labelled ConfigMap per Cluster in Courier's namespace", func(t *testing.T) {
		reportObjectHolds(ctx, t, w.ns, "copied by the agent")
	})
	t.Run("nobody else may report", func(t *testing.T) { othersReportStatus(ctx, t, w) })
	t.Run("a bad report says why", func(t *testing.T) {
		err := putStatus(ctx, agent.courier, w.ns, secretRow, statusReport{"Done", "", "", "5m"})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.phase") {
			t.Errorf("unknown phase: %v, want 422 naming status.phase", err)
		}
		err = putStatus(ctx, agent.courier, w.ns, secretRow, statusReport{v1alpha1.CopyPhaseSynced, "", "", "often"})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), courierapi.AnnotationReportInterval) {
			t.Errorf("bad interval: %v, want 422 naming the annotation", err)
		}
	})
	t.Run("a silent agent's rows turn Unreachable, and come back", func(t *testing.T) { silentAgent(ctx, t, w, agent, rv) })
	t.Run("a restarted Courier shows the report at once", func(t *testing.T) {
		if err := putStatus(ctx, agent.courier, w.ns, secretRow, statusReport{v1alpha1.CopyPhaseSynced, "before the restart", rv, "5m"}); err != nil {
			t.Fatal(err)
		}
		waitWide(t, w.ns, secretRow, "Synced", "before the restart")
		restartCourier(t, nil)
		// Until the view is ready a list may lack the row; once it has the
		// row, the row must show the report, never the wait.
		eventually(t, "the row after the restart", func() (bool, string) {
			r, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).Get(ctx, secretRow, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if r.Status.Message != "before the restart" {
				t.Fatalf("the first answer after the restart: %s %q", r.Status.Phase, r.Status.Message)
			}
			return true, ""
		})
	})
	t.Run("two replicas show the same report", func(t *testing.T) { replicasAgree(ctx, t, w, agent, rv) })
}

// reportObjectHolds checks the report ConfigMap of edge1.
func reportObjectHolds(ctx context.Context, t *testing.T, ns, message string) {
	t.Helper()
	name := clusterstatus.ObjectName(types.NamespacedName{Namespace: ns, Name: "edge1"})
	cm, err := upstreamClients(t).kube.CoreV1().ConfigMaps(localenv.DefaultCourierNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[clusterstatus.Label] != "true" || cm.Annotations[clusterstatus.AnnotationCluster] != "edge1" || cm.Annotations[clusterstatus.AnnotationClusterNamespace] != ns {
		t.Errorf("report %s: labels %v annotations %v", name, cm.Labels, cm.Annotations)
	}
	if !strings.Contains(cm.Data[secretRow], message) || cm.Data[clusterstatus.HeartbeatKey] == "" {
		t.Errorf("report %s data: %v", name, cm.Data)
	}
	if strings.Contains(fmt.Sprint(cm.Data), secretValue) {
		t.Error("the report holds the Secret's value")
	}
}

// othersReportStatus: another Cluster's agent, the cluster-admin and a
// workspace admin are refused, and the agent's report stays. The positive
// control is the agent's own report above, through the same aggregator.
func othersReportStatus(ctx context.Context, t *testing.T, w *workspace) {
	forged := statusReport{v1alpha1.CopyPhaseConflict, "forged", "1", "5m"}
	err := putStatus(ctx, newAgentUser(t, "courier-agent-edge2").courier, w.ns, secretRow, forged)
	forbiddenBy(t, "edge2's agent reporting edge1's row", err, "is not a row of its Cluster")
	admin, err := versioned.NewForConfig(env.Upstream.Config) // system:masters
	if err != nil {
		t.Fatal(err)
	}
	err = putStatus(ctx, admin, w.ns, secretRow, forged)
	forbiddenBy(t, "the cluster admin (system:masters)", err, "only by the courier-agent of its Cluster")
	err = putStatus(ctx, newAgentUser(t, "ws-admin").courier, w.ns, secretRow, forged)
	if !apierrors.IsForbidden(err) {
		t.Errorf("a workspace admin: want 403, got %v", err)
	}
	reportObjectHolds(ctx, t, w.ns, "copied by the agent")
	if line := wideLine(t, w.ns, secretRow); strings.Contains(line, "forged") {
		t.Errorf("a refused report shows: %s", line)
	}
}

var seenPulledSince = regexp.MustCompile(`nothing since \S+, when`)

var lastHeard = regexp.MustCompile(`was last heard at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) and reports every 2s`)

// silentAgent reports with a 2 s interval and then stays silent: within
// three intervals (and the view's reaction) the rows say Unreachable and
// when the agent was last heard; a fresh report brings them back.
func silentAgent(ctx context.Context, t *testing.T, w *workspace, agent agentUser, rv string) {
	sent := time.Now().UTC()
	if err := putStatus(ctx, agent.courier, w.ns, secretRow, statusReport{v1alpha1.CopyPhaseSynced, "heartbeat every 2s", rv, "2s"}); err != nil {
		t.Fatal(err)
	}
	waitWide(t, w.ns, secretRow, "Synced", "heartbeat every 2s")
	var line string
	eventually(t, "the silent agent's row turns Unreachable", func() (bool, string) {
		line = wideLine(t, w.ns, secretRow)
		return strings.Contains(line, "Unreachable"), line
	})
	unreachableAt := time.Now().UTC()
	m := lastHeard.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the Unreachable row does not say when its agent was last heard: %s", line)
	}
	heard, err := time.Parse(time.RFC3339, m[1])
	if err != nil || heard.Before(sent.Add(-2*time.Second)) || heard.After(sent.Add(5*time.Second)) {
		t.Errorf("last heard %s, report sent at %s", m[1], sent.Format(time.RFC3339))
	}
	if unreachableAt.Sub(sent) < 5*time.Second {
		t.Errorf("Unreachable %s after the report, before three 2s intervals", unreachableAt.Sub(sent))
	}
	// The other pulled Cluster never reported: its rows wait, they are not
	// Unreachable.
	waitWide(t, w.ns, "app.edge2.secret.db", "Pending")
	if err := putStatus(ctx, agent.courier, w.ns, secretRow, statusReport{v1alpha1.CopyPhaseSynced, "back again", rv, "5m"}); err != nil {
		t.Fatal(err)
	}
	waitWide(t, w.ns, secretRow, "Synced", "back again", rv)
}

// replicasAgree runs two replicas behind a Balancer: a report sent through
// the aggregator reaches one of them, and both show it.
func replicasAgree(ctx context.Context, t *testing.T, w *workspace, agent agentUser, rv string) {
	replicas, _ := startReplicas(t)
	for i, msg := range []string{"first through the balancer", "second through the balancer"} {
		var err error
		eventually(t, "the agent reports through the replicas", func() (bool, string) {
			err = putStatus(ctx, agent.courier, w.ns, secretRow, statusReport{v1alpha1.CopyPhaseSynced, msg, rv, "5m"})
			return err == nil, fmt.Sprint(err)
		})
		for _, r := range replicas {
			eventually(t, fmt.Sprintf("report %d on %s", i+1, r.LogPath), func() (bool, string) {
				rows := replicaRows(t, r, w.ns)
				for _, row := range rows {
					if strings.HasPrefix(row, secretRow+" Synced "+rv+" "+msg) {
						return true, ""
					}
				}
				return false, strings.Join(rows, "\n")
			})
		}
	}
	// Since when a replica has seen a Cluster pulled, for rows whose agent
	// never reported, is that replica's own memory (docs/design-decisions.md):
	// replicas started a second apart say different seconds.
	a, b := replicaRows(t, replicas[0], w.ns), replicaRows(t, replicas[1], w.ns)
	for _, rows := range [][]string{a, b} {
		for i, r := range rows {
			rows[i] = seenPulledSince.ReplaceAllString(r, "nothing since <time>, when")
		}
	}
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("the replicas differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}
