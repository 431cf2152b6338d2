package e2e

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	courierapi "github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/test/localenv"
)

// pulled is the downstream cluster the pull tests' agents write into:
// downstream-2, which no pull test's Cluster has a kubeconfig Secret for.
const pulled = 1

var (
	agentBinaryOnce sync.Once
	agentBinary     string
	agentBinaryErr  error
)

// agentBin returns $COURIER_AGENT_BINARY, or builds courier-agent once.
func agentBin(t *testing.T) string {
	t.Helper()
	agentBinaryOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		agentBinary, agentBinaryErr = localenv.AgentBinary(ctx, repoRoot)
	})
	if agentBinaryErr != nil {
		t.Fatal(agentBinaryErr)
	}
	return agentBinary
}

// pullWorkspace makes a workspace with one Cluster, edge, pulled by the
// agent user (its courier.dev/agent-user, bound to courier:agent in the
// workspace) and without a kubeconfig Secret, and a ClusterGroup default
// holding it.
func pullWorkspace(t *testing.T, name, user string) *workspace {
	w := newWorkspace(t, name)
	w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge",
		Annotations: map[string]string{courierapi.AnnotationAgentUser: user}}})
	w.apply(selectAll("default"))
	w.bind("courier:agent", user)
	return w
}

// startAgent runs courier-agent for the workspace's Cluster edge into
// downstream-2 (at -v=2, so that the tests read what it did), stopped when
// the test ends.
func startAgent(t *testing.T, w *workspace, user string, args ...string) *localenv.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := env.StartAgent(ctx, localenv.AgentOptions{Binary: agentBin(t), Cluster: w.ns + "/edge", User: user,
		Downstream: env.Downstreams[pulled], RepoRoot: repoRoot, Args: append([]string{"-v=2"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a
}

// agentLogSays waits until the agent's log holds a line with every one of
// subs.
func agentLogSays(t *testing.T, a *localenv.Agent, what string, subs ...string) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		b, err := os.ReadFile(a.LogPath)
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(string(b), "\n") {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(line, s)
			}
			if all {
				return true, ""
			}
		}
		return false, "no line with " + strings.Join(subs, ", ") + " in " + a.LogPath + ":\n" + localenv.Tail(a.LogPath, 20)
	})
}

// copyWrites are the agent's (and Courier's) writes of copies and
// namespaces into downstream-2, as its audit log records them: not its
// Lease, which is not a copy.
func copyWrites(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, wr := range courierAuditWrites(t, pulled, false) {
		f := strings.Fields(wr)
		if len(f) > 1 && (f[1] == "secrets" || f[1] == "configmaps" || f[1] == "namespaces") {
			out = append(out, wr)
		}
	}
	return out
}
