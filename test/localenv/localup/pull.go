package localup

import (
	"context"
	"fmt"

	"github.com/courier-dev/courier/test/localenv"
)

// The second downstream cluster is pulled (docs/design.md#pull-delivery): its Fleet Cluster
// carries courier.dev/agent-user and no kubeconfig Secret, and a
// courier-agent process writes its copies, as docs/pull.md installs one.

// pulledIndex is the downstream cluster (0-based) a courier-agent pulls
// for.
const pulledIndex = 1

// IsPulled reports whether the i-th downstream cluster (0-based) is
// pulled by a courier-agent rather than pushed.
func IsPulled(i int) bool { return i == pulledIndex }

// agentUser is the upstream identity of cluster name's agent.
func agentUser(name string) string { return "courier-agent-" + name }

// pulledCluster is the Fleet Cluster of a pulled downstream cluster: the
// agent's user, no kubeconfig Secret.
func pulledCluster(name string, i int) string {
	return fmt.Sprintf(`---
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    env: %[3]s
    name: %[1]s
  annotations:
    courier.dev/agent-user: %[4]s
spec: {}
`, name, Workspace, envLabel(i), agentUser(name))
}

// startAgents binds courier:agent to each pulled cluster's agent user in
// the workspace and starts its courier-agent.
func (s *Setup) startAgents(ctx context.Context, c Config, kubectl func(...string) error) error {
	for i, d := range s.Env.Downstreams {
		if !IsPulled(i) {
			continue
		}
		user := agentUser(d.Name)
		if err := kubectl("create", "rolebinding", user, "-n", Workspace, "--clusterrole=courier:agent", "--user="+user); err != nil {
			return err
		}
		a, err := s.Env.StartAgent(ctx, localenv.AgentOptions{Binary: c.AgentBinary, Cluster: Workspace + "/" + d.Name, User: user,
			Downstream: d, Args: []string{"-v=2"}})
		if err != nil {
			return err
		}
		s.Agents = append(s.Agents, a)
		c.Log("localup: courier-agent for %s/%s (metrics %s), log %s", Workspace, d.Name, a.MetricsURL, a.LogPath)
	}
	return nil
}
