package main

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

func isPulled(i int) bool { return i == pulledIndex }

// agentUser is the upstream identity of cluster name's agent.
func agentUser(name string) string { return "courier-agent-" + name }

// pulledCluster is the Fleet Cluster of a pulled downstream cluster: the
// agent's user, no kubeconfig Secret.
func pulledCluster(name string, i int) string {
	envLabel := "prod"
	if i == 0 {
		envLabel = "dev"
	}
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
`, name, workspace, envLabel, agentUser(name))
}

// startAgents binds courier:agent to each pulled cluster's agent user in
// the workspace and starts its courier-agent.
func startAgents(ctx context.Context, env *localenv.Env, c config, kubectl func(...string) error, logf func(string, ...any)) error {
	for i, d := range env.Downstreams {
		if !isPulled(i) {
			continue
		}
		user := agentUser(d.Name)
		if err := kubectl("create", "rolebinding", user, "-n", workspace, "--clusterrole=courier:agent", "--user="+user); err != nil {
			return err
		}
		a, err := env.StartAgent(ctx, localenv.AgentOptions{Binary: c.agent, Cluster: workspace + "/" + d.Name, User: user,
			Downstream: d, Args: []string{"-v=2"}})
		if err != nil {
			return err
		}
		logf("localup: courier-agent for %s/%s (metrics %s), log %s", workspace, d.Name, a.MetricsURL, a.LogPath)
	}
	return nil
}
