package node

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/test/localenv"
)

const (
	courierNS = "courier-system"
	// workspace is the Fleet workspace of the suite's HelmOp and Clusters.
	workspace = "fleet-default"
	// copyNS is where the HelmOp's copies land downstream.
	copyNS = "example"
)

// helm runs helm as the admin of cl, its state under the work directory.
func (c *nodeCluster) helmRun(t *testing.T, cl *localenv.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.helm, args...)
	cmd.Dir = env.repoRoot
	home := filepath.Join(env.workDir, "helm")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Logf("helm %s", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// imageRef splits the name an archive's index carries into repository and
// tag, the chart's image.repository and image.tag.
func imageRef(t *testing.T, archive string) (repo, tag string) {
	t.Helper()
	a, err := readArchive(archive)
	must(t, err, "reading %s", archive)
	ref, err := a.ref()
	must(t, err, "the name in %s", archive)
	i := strings.LastIndex(ref, ":")
	return ref[:i], ref[i+1:]
}

// testServerChart installs the server chart as docs/install.md says and
// checks what a user checks: two replicas Ready, the APIService Available
// through the chart's Service, `kubectl get dcp`, one Lease holder, and a
// HelmOp's copies in the pushed downstream cluster.
func testServerChart(t *testing.T, c *nodeCluster) {
	crds, real, err := localenv.FindFleetCRDs(env.repoRoot)
	must(t, err, "Fleet's CRDs")
	args := []string{"install", "courier", "artifacts/chart", "-n", courierNS, "--create-namespace"}
	args = append(args, c.imageArgs(t, env.images["courier-apiserver"])...)
	if real {
		// Where Fleet is installed (docs/install.md): its CRDs, not the chart's.
		c.kubectl(t, c.up, "apply", "-f", crds)
		args = append(args, "--set", "crds.install=false")
	}
	c.helmRun(t, c.up, args...)
	c.waitCourier(t, 2)
	rows := c.kubectl(t, c.up, "get", "dcp", "-A")
	t.Logf("kubectl get dcp -A: %q", strings.TrimSpace(rows))
	c.pushHelmOp(t)
	c.waitCopy(t, "example-settings", "hello from upstream", 2*time.Minute)
	eventually(t, time.Minute, "the rows Synced", func() (bool, string) {
		phases := c.kubectl(t, c.up, "-n", workspace, "get", "dcp", "-o", "jsonpath={.items[*].status.phase}")
		return phases == "Synced Synced", phases
	})
}

// imageArgs are the --set flags naming the image an archive holds.
func (c *nodeCluster) imageArgs(t *testing.T, archive string) []string {
	repo, tag := imageRef(t, archive)
	return []string{"--set", "image.repository=" + repo, "--set", "image.tag=" + tag}
}

// waitCourier waits for the Deployment's rollout (replicas Ready), the
// APIService Available and one Lease holder among the Pods.
func (c *nodeCluster) waitCourier(t *testing.T, replicas int) {
	t.Helper()
	if _, err := c.lenv.Kubectl(context.Background(), c.up, "-n", courierNS, "rollout", "status", "deployment/courier", "--timeout=3m"); err != nil {
		t.Fatalf("Courier's rollout: %v\n%s", err, c.diagnose(courierNS))
	}
	pods := runningPods(t, c, courierNS, "app=courier")
	if len(pods) != replicas {
		t.Fatalf("%d Courier Pods running and Ready, want %d", len(pods), replicas)
	}
	if _, err := c.lenv.Kubectl(context.Background(), c.up, "wait", "--for=condition=Available", "apiservice/v1alpha1.courier.dev", "--timeout=2m"); err != nil {
		t.Fatalf("the APIService: %v\n%s", err, c.diagnose(courierNS))
	}
	holder := c.leader(t)
	found := false
	for _, p := range pods {
		found = found || p.Name == holder
	}
	if !found {
		t.Fatalf("the Lease's holder %q is none of the Pods", holder)
	}
	t.Logf("Courier: %d Pods Ready, APIService Available, leader %s", len(pods), holder)
}

// leader is the Pod holding Courier's Lease (its identity is
// <pod>_<uuid>), waiting up to a minute for one.
func (c *nodeCluster) leader(t *testing.T) string {
	t.Helper()
	var holder string
	eventually(t, time.Minute, "a Lease holder", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := c.cs.CoordinationV1().Leases(courierNS).Get(ctx, "courier", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, fmt.Sprint(err)
		}
		holder, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_")
		return true, ""
	})
	return holder
}

// runningPods are the Pods matching selector that run and are Ready and
// not being deleted.
func runningPods(t *testing.T, c *nodeCluster, ns, selector string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range podsOf(t, c.cs, ns, selector) {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pushHelmOp registers the downstream cluster as the pushed Cluster c1
// (its kubeconfig Secret names the address Pods reach it at) and applies
// artifacts/examples/helmop.yaml aimed at it.
func (c *nodeCluster) pushHelmOp(t *testing.T) {
	t.Helper()
	example, err := os.ReadFile(filepath.Join(env.repoRoot, "artifacts", "examples", "helmop.yaml"))
	must(t, err, "the example HelmOp")
	objects := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: c1-kubeconfig
  namespace: %[1]s
data:
  value: %[2]s
---
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: c1
  namespace: %[1]s
spec:
  kubeConfigSecret: c1-kubeconfig
---
%[3]s
  targets:
  - clusterName: c1
`, workspace, base64.StdEncoding.EncodeToString(c.downKubeconfig), strings.TrimRight(string(example), "\n"))
	path := filepath.Join(env.workDir, "helmop.yaml")
	must(t, os.WriteFile(path, []byte(objects), 0o600), "writing %s", path)
	c.kubectl(t, c.up, "apply", "-f", path)
}

// waitCopy waits until the downstream ConfigMap copyNS/name holds greeting.
func (c *nodeCluster) waitCopy(t *testing.T, name, greeting string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "the copy "+copyNS+"/"+name+" downstream", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cm, err := c.downCS.CoreV1().ConfigMaps(copyNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error() + "; rows: " + c.lenvRows()
		}
		return cm.Data["greeting"] == greeting, fmt.Sprintf("greeting %q", cm.Data["greeting"])
	})
}

// lenvRows is `kubectl get dcp -o wide` in the workspace, for messages.
func (c *nodeCluster) lenvRows() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.lenv.Kubectl(ctx, c.up, "-n", workspace, "get", "dcp", "-o", "wide")
	if err != nil {
		return err.Error()
	}
	return out
}

// diagnose is what a user would look at when Courier does not come up:
// its Pods, their last log lines and the APIService's conditions.
func (c *nodeCluster) diagnose(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b strings.Builder
	for _, args := range [][]string{
		{"-n", ns, "get", "pods", "-o", "wide"},
		{"-n", ns, "logs", "-l", "app=courier", "--tail=15", "--prefix"},
		{"get", "apiservice", "v1alpha1.courier.dev", "-o", "jsonpath={.status.conditions}"},
	} {
		out, err := c.lenv.Kubectl(ctx, c.up, args...)
		fmt.Fprintf(&b, "$ kubectl %s\n%s%v\n", strings.Join(args, " "), out, errOrEmpty(err))
	}
	return b.String()
}

func errOrEmpty(err error) any {
	if err == nil {
		return ""
	}
	return err
}
