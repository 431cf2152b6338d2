package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/test/localenv"
)

// nodeName is the kubelet's node.
const nodeName = "node-1"

// testNodeReady waits for both kubelets' Nodes to register and turn Ready.
func testNodeReady(t *testing.T, c *nodeCluster) {
	waitNodeReady(t, c.cs, nodeName, c.kubelet)
	waitNodeReady(t, c.edgeCS, downNodeName, c.downKubelet)
}

func waitNodeReady(t *testing.T, cs kubernetes.Interface, nodeName string, k *kubelet) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	var last string
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil {
			last = nodeConditions(node)
			if ready(node) {
				t.Logf("node %s Ready after %s: %s; kubelet %s, runtime %s, addresses %v", nodeName,
					time.Since(began).Round(time.Second), last, node.Status.NodeInfo.KubeletVersion,
					node.Status.NodeInfo.ContainerRuntimeVersion, node.Status.Addresses)
				return
			}
		} else {
			last = err.Error()
		}
		select {
		case <-k.exited:
			t.Fatalf("the kubelet exited; its log:\n%s", tail(k.log, 60))
		case <-ctx.Done():
			t.Fatalf("node %s not Ready: %s; the kubelet's log:\n%s", nodeName, last, tail(k.log, 60))
		case <-time.After(2 * time.Second):
		}
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeConditions(n *corev1.Node) string {
	var parts []string
	for _, c := range n.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Message))
	}
	return strings.Join(parts, ", ")
}

// kubelet is a running kubelet.
type kubelet struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	// hadVarLib: /var/lib/kubelet existed before. The kubelet puts its
	// device-plugin socket in /var/lib/kubelet/device-plugins whatever its
	// --root-dir; stop removes what it made there.
	hadVarLib bool
}

const varLibKubelet = "/var/lib/kubelet"

// nodeSpec is one kubelet of the suite. Both share the node's network
// namespace (and its address), each with its own containerd (a kubelet
// kills the Pods it does not know of, so two cannot share one), its own
// bridge and Pod range, its own ports and cgroup.
type nodeSpec struct {
	name    string
	cluster *localenv.Cluster
	ctrd    *containerd
	// apiserver is where the kubelet reaches its cluster, on the node
	// namespace's loopback (the suite forwards it).
	apiserver string
	port      int // the kubelet's; its healthz port is port-2
	bridge    string
	podCIDR   string
}

// kubeletConfig is the KubeletConfiguration: cgroup v1 allowed, cgroupfs,
// the node's containerd, cgroups under the suite's own, every port on the
// node namespace's loopback, everything under dir, eviction thresholds
// low enough that a busy build machine's disk does not taint the node.
func kubeletConfig(dir string, n nodeSpec) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
containerRuntimeEndpoint: unix://%[2]s
address: 127.0.0.1
port: %[5]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[6]d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
failSwapOn: false
resolvConf: %[3]q
podLogsDir: %[4]q
staticPodPath: ""
registerNode: true
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.ctrd.cgroupParent, n.ctrd.sock, filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "pod-logs"), n.port, n.port-2)
}

// cniConfig is a kubelet's Pod network: a bridge inside the node's
// namespace, Pod addresses from its range, IPAM state under the work
// directory.
func cniConfig(n nodeSpec) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "courier-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %[1]q,
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %[2]q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %[3]q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.bridge, n.podCIDR, filepath.Join(env.workDir, "cni-ipam-"+n.name))
}

// startKubelet writes the kubelet's kubeconfig (a client certificate for
// system:node:<name> in system:nodes, pointed at n.apiserver), its
// configuration and the CNI configuration, makes its cgroup root, and
// starts it in the node's namespace.
func startKubelet(lenv *localenv.Env, bin, dir string, n nodeSpec) (*kubelet, error) {
	for _, d := range []string{"root", "certs", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	path, _, err := lenv.UserKubeconfig(n.cluster, "system:node:"+n.name, "system:nodes")
	if err != nil {
		return nil, err
	}
	kc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kc = []byte(strings.ReplaceAll(string(kc), n.cluster.URL, "https://"+n.apiserver))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	files := map[string]string{
		kubeconfig:                        string(kc),
		filepath.Join(dir, "config.yaml"): kubeletConfig(dir, n),
		filepath.Join(dir, "resolv.conf"): "nameserver 127.0.0.1\n",
		filepath.Join(n.ctrd.dir, "cni", "net.d", "10-courier.conflist"): cniConfig(n),
	}
	for p, content := range files {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	if err := makeCgroup(n.ctrd.cgroupParent); err != nil {
		return nil, err
	}
	k := &kubelet{log: filepath.Join(dir, "kubelet.log"), exited: make(chan struct{})}
	if _, err := os.Stat(varLibKubelet); err == nil {
		k.hadVarLib = true
	}
	logFile, err := os.Create(k.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	k.cmd = exec.Command("nsenter", "--net="+env.netns.path, bin,
		"--config="+filepath.Join(dir, "config.yaml"),
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(dir, "root"),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--hostname-override="+n.name,
		"--node-ip="+nodeIP,
		"--v=2")
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = k.cmd.Wait(); close(k.exited) }()
	return k, nil
}

// stop stops the kubelet: SIGTERM, then SIGKILL after 20 s.
func (k *kubelet) stop() {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(20 * time.Second):
		fmt.Fprintln(os.Stderr, "node: the kubelet did not stop within 20s of SIGTERM: killing it")
		_ = k.cmd.Process.Kill()
		<-k.exited
	}
	if !k.hadVarLib {
		if err := os.RemoveAll(varLibKubelet); err != nil {
			fmt.Fprintln(os.Stderr, "node: clean-up:", err)
		}
	}
}

// makeCgroup makes cgroup path in every cgroup v1 hierarchy, copying the
// cpuset hierarchy's CPUs and memory nodes from its root (a new cpuset
// cgroup starts with none, and nothing could run in it).
func makeCgroup(path string) error {
	roots, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, root := range roots {
		if st, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil || st.IsDir() {
			continue
		}
		dir := filepath.Join(root, path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(root) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) != "" {
				continue
			}
			v, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
