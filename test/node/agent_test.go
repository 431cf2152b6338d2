package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	agentNS = "cattle-fleet-system"
	// agentSA is the agent's identity upstream (docs/pull.md step 1).
	agentSA   = "courier-agent-edge"
	agentUser = "system:serviceaccount:" + workspace + ":" + agentSA
	// edgeCopyNS is where the edge HelmOp's copies land.
	edgeCopyNS = "example-edge"
)

// testAgentChart takes the edge cluster from nothing to pulled as
// docs/pull.md does: an identity and a kubeconfig upstream, the Cluster
// annotated, the agent chart installed with helm in edge (whose own node
// runs it, in-cluster configuration, the chart's RBAC). The HelmOp's
// copies land in edge and its rows turn Synced.
func testAgentChart(t *testing.T, c *nodeCluster) {
	c.kubectl(t, c.up, "-n", workspace, "create", "serviceaccount", agentSA)
	c.kubectl(t, c.up, "-n", workspace, "create", "rolebinding", agentSA,
		"--clusterrole=courier:agent", "--serviceaccount="+workspace+":"+agentSA)
	token := strings.TrimSpace(c.kubectl(t, c.up, "-n", workspace, "create", "token", agentSA, "--duration=8760h"))
	kubeconfig := filepath.Join(env.workDir, "agent-upstream.kubeconfig")
	must(t, writeTokenKubeconfig(kubeconfig, "https://"+apiserverForPods, c.up.Config.CAData, token), "the agent's kubeconfig")
	objects := fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: edge
  namespace: %[1]s
  annotations:
    courier.dev/agent-user: %[2]s
---
apiVersion: fleet.cattle.io/v1alpha1
kind: HelmOp
metadata:
  name: edge-example
  namespace: %[1]s
spec:
  helm:
    chart: oci://registry.example.com/charts/example
    version: 1.0.0
  namespace: %[3]s
  downstreamResources:
  - kind: Secret
    name: example-credentials
  - kind: ConfigMap
    name: example-settings
  targets:
  - clusterName: edge
`, workspace, agentUser, edgeCopyNS)
	path := filepath.Join(env.workDir, "edge.yaml")
	must(t, os.WriteFile(path, []byte(objects), 0o600), "writing %s", path)
	c.kubectl(t, c.up, "apply", "-f", path)

	args := []string{"install", "courier-agent", "artifacts/agent-chart", "-n", agentNS, "--create-namespace",
		"--set", "cluster=" + workspace + "/edge", "--set-file", "upstream.kubeconfig=" + kubeconfig}
	c.helmRun(t, c.edge, append(args, c.imageArgs(t, env.images["courier-agent"])...)...)
	c.kubectl(t, c.edge, "-n", agentNS, "rollout", "status", "deployment/courier-agent", "--timeout=3m")
	eventually(t, 2*time.Minute, "the edge copies", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cm, err := c.edgeCS.CoreV1().ConfigMaps(edgeCopyNS).Get(ctx, "example-settings", metav1.GetOptions{})
		if err != nil {
			return false, err.Error() + "; rows: " + c.lenvRows()
		}
		_, err = c.edgeCS.CoreV1().Secrets(edgeCopyNS).Get(ctx, "example-credentials", metav1.GetOptions{})
		return err == nil && cm.Data["greeting"] != "", fmt.Sprint(err)
	})
	eventually(t, time.Minute, "the edge rows Synced", func() (bool, string) {
		phases := c.kubectl(t, c.up, "-n", workspace, "get", "dcp", "--field-selector", "spec.cluster=edge",
			"-o", "jsonpath={.items[*].status.phase}")
		return phases == "Synced Synced", phases + "; rows: " + c.lenvRows()
	})
	c.checkAgentFlowControl(t)
}

// checkAgentFlowControl checks that the server chart, installed with its
// defaults, put the agent's requests in their own priority level
// (docs/pull.md): the upstream has dispatched requests of the FlowSchema
// courier-agents in the Limited level courier-agents, which the agent's
// list, watch, payload reads and reports are.
func (c *nodeCluster) checkAgentFlowControl(t *testing.T) {
	t.Helper()
	typ := c.kubectl(t, c.up, "get", "prioritylevelconfiguration", "courier-agents", "-o", "jsonpath={.spec.type}")
	level := c.kubectl(t, c.up, "get", "flowschema", "courier-agents", "-o", "jsonpath={.spec.priorityLevelConfiguration.name}/{.spec.distinguisherMethod.type}")
	if typ != "Limited" || level != "courier-agents/ByUser" {
		t.Fatalf("the chart's flow control: level type %q, FlowSchema %q; want Limited and courier-agents/ByUser", typ, level)
	}
	series := `apiserver_flowcontrol_dispatched_requests_total{flow_schema="courier-agents",priority_level="courier-agents"}`
	eventually(t, time.Minute, "the agent's requests dispatched in courier-agents", func() (bool, string) {
		for _, line := range strings.Split(c.kubectl(t, c.up, "get", "--raw", "/metrics"), "\n") {
			if strings.HasPrefix(line, series+" ") && strings.TrimSpace(strings.TrimPrefix(line, series)) != "0" {
				t.Logf("upstream: %s", line)
				return true, ""
			}
		}
		return false, "no " + series + " above 0 on the upstream's /metrics"
	})
}

// writeTokenKubeconfig writes the agent's upstream kubeconfig as
// docs/pull.md makes it (server, CA, token), plus tls-server-name: the
// upstream's certificate names localhost, not the node's address the
// suite forwards it at.
func writeTokenKubeconfig(path, server string, ca []byte, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["mgmt"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, TLSServerName: "localhost"}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["mgmt"] = &clientcmdapi.Context{Cluster: "mgmt", AuthInfo: "agent"}
	kc.CurrentContext = "mgmt"
	return clientcmd.WriteToFile(*kc, path)
}

// testUninstall runs `helm uninstall` for both charts: no Pod of Courier or
// of the agent is left, no container of their images runs on either
// node, the APIService is gone; what docs/install.md says stays does:
// the copies downstream (nothing deletes them), Fleet's CRDs.
func testUninstall(t *testing.T, c *nodeCluster) {
	c.helmRun(t, c.edge, "uninstall", "courier-agent", "-n", agentNS, "--wait")
	c.helmRun(t, c.up, "uninstall", "courier", "-n", courierNS, "--wait")
	eventually(t, 2*time.Minute, "no Courier Pods", func() (bool, string) {
		up := podsOf(t, c.cs, courierNS, "")
		edge := podsOf(t, c.edgeCS, agentNS, "")
		return len(up)+len(edge) == 0, fmt.Sprintf("%d Pods in %s upstream, %d in %s on edge", len(up), courierNS, len(edge), agentNS)
	})
	eventually(t, time.Minute, "no container of Courier's images running", func() (bool, string) {
		running := runningCourierContainers(t, env.ctrd)
		running = append(running, runningCourierContainers(t, c.downCtrd)...)
		return len(running) == 0, strings.Join(running, ", ")
	})
	if out, err := c.lenv.Kubectl(context.Background(), c.up, "get", "apiservice", "v1alpha1.courier.dev"); err == nil {
		t.Errorf("the APIService is still there: %s", out)
	}
	for _, cl := range []struct {
		name string
		ns   string
		cs   func() error
	}{
		{"down", copyNS, func() error { return copyExists(c.downCS, copyNS) }},
		{"edge", edgeCopyNS, func() error { return copyExists(c.edgeCS, edgeCopyNS) }},
	} {
		if err := cl.cs(); err != nil {
			t.Errorf("the copies in %s/%s are gone after helm uninstall (docs/install.md: they stay): %v", cl.name, cl.ns, err)
		}
	}
	c.kubectl(t, c.up, "get", "crd", "helmops.fleet.cattle.io")
}

// copyExists checks that both copies are in ns of a downstream cluster.
func copyExists(cs kubernetes.Interface, ns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "example-settings", metav1.GetOptions{}); err != nil {
		return err
	}
	_, err := cs.CoreV1().Secrets(ns).Get(ctx, "example-credentials", metav1.GetOptions{})
	return err
}

// runningCourierContainers lists the containers of a containerd whose
// image is Courier's or the agent's and whose task is running.
func runningCourierContainers(t *testing.T, ctrd *containerd) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	containers, err := ctrd.ctr(ctx, "containers", "list")
	must(t, err, "listing containers")
	tasks, err := ctrd.ctr(ctx, "tasks", "list")
	must(t, err, "listing tasks")
	status := map[string]string{}
	for _, line := range strings.Split(tasks, "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			status[f[0]] = f[2]
		}
	}
	var out []string
	for _, line := range strings.Split(containers, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.Contains(f[1], "/courier") && status[f[0]] == "RUNNING" {
			out = append(out, f[0]+" ("+f[1]+")")
		}
	}
	return out
}
