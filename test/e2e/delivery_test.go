package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	courierapi "github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// TestAgentAnnotationOneAnswer: who delivers a Cluster has one answer
// (pkg/delivery, docs/design.md#pull-delivery), the same in the engine
// (copy written or not), the rows, the DELIVERED-BY column and the agent
// authorizer (payload and status served to the agent or refused), for each
// kind of agent annotation:
//
//   - edge, a user name: pulled by that user, who reads its payload (the
//     authorizer's positive control);
//   - blank, an empty value: no agent is named, so the replicas push it:
//     its copy is written (the engine's positive control), its row is
//     Synced, the column names the replica, and the user who would be its
//     agent reads no payload;
//   - spaced (white space around the user) and badsa (a ServiceAccount user
//     without a name): nobody delivers, though each has a working
//     kubeconfig: nothing is written there, their rows are Invalid saying
//     why, the column shows <none>, and the user the annotation names
//     reads no payload and reports no status.
func TestAgentAnnotationOneAnswer(t *testing.T) {
	w := newWorkspace(t, "ws-one-answer")
	ctx := context.Background()
	dest := "one-answer-dest"
	badsa := "system:serviceaccount:" + w.ns // no name: malformed
	annotated := map[string]string{"edge": "courier-agent-edge", "blank": "", "spaced": " courier-agent-spaced", "badsa": badsa}
	// The Clusters nobody must deliver first, on the downstream the
	// engine's positive control does not use.
	for _, c := range []struct {
		name       string
		downstream int
	}{{"spaced", 1}, {"badsa", 1}, {"blank", 0}} {
		w.addCluster(c.name, c.downstream, "")
		w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: c.name, Annotations: map[string]string{courierapi.AnnotationAgentUser: annotated[c.name]}},
			Spec: fleet.ClusterSpec{KubeConfigSecret: w.ns + "-" + c.name + "-kubeconfig"}})
	}
	w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Annotations: map[string]string{courierapi.AnnotationAgentUser: annotated["edge"]}}})
	for _, u := range []string{"courier-agent-edge", "courier-agent-blank", "courier-agent-spaced", badsa} {
		w.bind("courier:agent", u) // the upstream RBAC lets each reach Courier; Courier decides
	}
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v1"}})
	var targets []fleet.BundleTarget
	for name := range annotated {
		targets = append(targets, fleet.BundleTarget{ClusterName: name})
	}
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")}, targets...))

	oneAnswerEngineAndRows(t, w, dest) // not a subtest: the workspace's waits fail w.t
	t.Run("the DELIVERED-BY column", func(t *testing.T) {
		for cluster, want := range map[string]string{"edge": "agent", "blank": courier.Name(), "spaced": "<none>", "badsa": "<none>"} {
			f := strings.Fields(wideLine(t, w.ns, "app."+cluster+".secret.s"))
			if len(f) == 0 || f[len(f)-1] != want {
				t.Errorf("DELIVERED-BY of Cluster %s's row: %q, want %s", cluster, f, want)
			}
		}
	})
	t.Run("the authorizer", func(t *testing.T) { oneAnswerAuthorizer(ctx, t, w, badsa) })
}

// oneAnswerEngineAndRows: blank's copy is written and kept in step, its
// row Synced; edge's row waits for its agent; the rows of the Clusters
// nobody delivers are Invalid saying why, and nothing is written for them
// while blank's copy is written twice.
func oneAnswerEngineAndRows(t *testing.T, w *workspace, dest string) {
	waitSecret(t, 0, dest, "s", 20*time.Second, "blank's pushed copy", secretData("k", "v1"))
	w.waitRows(metav1.ListOptions{}, "badsa/Secret/s@"+dest+"=Invalid", "blank/Secret/s@"+dest+"=Synced",
		"edge/Secret/s@"+dest+"=Pending", "spaced/Secret/s@"+dest+"=Invalid")
	eventually(t, "the Invalid rows say why", func() (bool, string) {
		msg := w.messages()
		for _, l := range strings.Split(msg, "\n") {
			if strings.Contains(l, " Invalid: ") && !strings.Contains(l, "names no agent Courier can recognise") {
				return false, msg
			}
		}
		return strings.Contains(msg, "white space around it") && strings.Contains(msg, "system:serviceaccount:<namespace>:<name>"), msg
	})
	// A change queues every Cluster's pass at once; blank's copy taking it
	// shows the engine passed after the annotations were read.
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v2"}})
	waitSecret(t, 0, dest, "s", 20*time.Second, "blank's copy kept in step", secretData("k", "v2"))
	stays(t, 5*time.Second, "nothing written for spaced and badsa", func() bool { return len(writesTo(t, 1, dest)) == 0 })
	if got := writesTo(t, 1, dest); len(got) != 0 {
		t.Errorf("Courier wrote for Clusters nobody delivers: %q", got)
	}
}

// oneAnswerAuthorizer: edge's agent reads its payload; the user who would
// be blank's agent, and the users spaced's and badsa's annotations name,
// read none, and badsa's named user reports no status.
func oneAnswerAuthorizer(ctx context.Context, t *testing.T, w *workspace, badsa string) {
	eventually(t, "edge's agent reads its payload", func() (bool, string) {
		_, err := newAgentUser(t, "courier-agent-edge").payload(ctx, w.ns, "app.edge.secret.s")
		return err == nil, errString(err)
	})
	for cluster, user := range map[string]string{"blank": "courier-agent-blank", "spaced": "courier-agent-spaced", "badsa": badsa} {
		_, err := newAgentUser(t, user).payload(ctx, w.ns, "app."+cluster+".secret.s")
		forbiddenBy(t, user+" reading Cluster "+cluster+"'s payload", err, "payloads are served only to the agent")
	}
	err := putStatus(ctx, newAgentUser(t, badsa).courier, w.ns, "app.badsa.secret.s",
		statusReport{phase: v1alpha1.CopyPhaseSynced, message: "not an agent", interval: "30s"})
	forbiddenBy(t, badsa+" reporting Cluster badsa's row", err, "reported only by the courier-agent")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
