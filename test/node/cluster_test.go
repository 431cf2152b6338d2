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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/courier-dev/courier/test/localenv"
)

// Addresses inside the node's namespace, each forwarded by the suite to a
// kube-apiserver on the machine's 127.0.0.1 (forwarder): the kubelet's on
// loopback, the Pods' on the node's address.
const (
	// apiserverInNode is the upstream for the kubelet (its kubeconfig names
	// 127.0.0.1, in the serving certificate).
	apiserverInNode = "127.0.0.1:6443"
	// apiserverForPods is the upstream for Pods: the kubernetes Service's
	// ClusterIP (kubernetesVIP:443) is DNATed to it in the node's namespace.
	apiserverForPods = nodeIP + ":6443"
	// downstreamForPods is the downstream cluster for Pods: Courier's
	// kubeconfig Secret names it, with tls-server-name localhost; the
	// downstream's kubernetes Service is DNATed to it for its own Pods.
	downstreamForPods = nodeIP + ":6444"
	// edgeInNode and edgeForPods: the second downstream cluster, edge (the
	// pulled one, with a node of its own), for its kubelet and its Pods.
	edgeInNode  = "127.0.0.1:6445"
	edgeForPods = nodeIP + ":6446"
	// downNodeName is the edge cluster's node.
	downNodeName = "node-2"
	// kubernetesVIP is the kubernetes Service's ClusterIP: the first
	// address of localenv's --service-cluster-ip-range (10.0.0.0/24), in
	// its serving certificate. It is only ever DNATed inside the node's
	// namespace; a packet to it that escaped the DNAT is dropped on node0.
	kubernetesVIP = "10.0.0.1"
)

// nodeCluster is the environment of TestNode: localenv's upstream and two
// downstream clusters (kube-apiserver with --enable-aggregator-routing,
// kube-controller-manager): down, pushed, without nodes, and edge, pulled
// by the agent chart, with a node; kube-schedulers and kubelets for the
// upstream and edge, and the forwarders into the node's namespace.
type nodeCluster struct {
	lenv           *localenv.Env
	up, down, edge *localenv.Cluster
	// admin clients of each
	cs, downCS, edgeCS kubernetes.Interface
	// The upstream's node and scheduler, and edge's: its own kubelet (on a
	// containerd of its own) and scheduler.
	kubelet, downKubelet     *kubelet
	scheduler, downScheduler *daemon
	downCtrd                 *containerd
	fwds                     []*forwarder
	dir                      string
	helm                     string // the helm binary
	// downKubeconfig is the downstream's admin kubeconfig as Pods reach it.
	downKubeconfig []byte
}

// TestNode runs the steps of `make test-node` on one node, in order: each needs
// the ones before it, so the first failure ends the test.
func TestNode(t *testing.T) {
	kubeletBin := os.Getenv("COURIER_KUBELET_BIN")
	if kubeletBin == "" {
		t.Fatal("COURIER_KUBELET_BIN is not set (hack/build-kubelet.sh prints it; `make test-node` sets it)")
	}
	c := startNodeCluster(t, filepath.Join(kubeletBin, "kubelet"))
	steps := []struct {
		name string
		f    func(*testing.T, *nodeCluster)
	}{
		{"NodeReady", testNodeReady},
		{"PodsRun", testPodsRun},
		{"ServerChart", testServerChart},
		{"Upgrade", testUpgrade},
		{"LeaderDeleted", testLeaderDeleted},
		{"AgentChart", testAgentChart},
		{"Uninstall", testUninstall},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.f(t, c) }) {
			t.Fatalf("%s failed; the steps after it need it", s.name)
		}
	}
}

// startNodeCluster starts everything TestNode needs and registers its
// clean-up with t.
func startNodeCluster(t *testing.T, kubeletBin string) *nodeCluster {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := &nodeCluster{dir: filepath.Join(env.workDir, "clusters")}
	tools, err := localenv.ToolsBin(ctx, env.repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	c.helm = filepath.Join(os.Getenv("COURIER_HELM_BIN"), "helm")
	if _, err := os.Stat(c.helm); err != nil {
		t.Fatalf("helm: %v (COURIER_HELM_BIN: hack/build-helm.sh prints it; `make test-node` sets it)", err)
	}
	c.lenv, err = localenv.Start(ctx, localenv.Options{
		Dir: c.dir, BinDir: tools, Downstreams: 2, ReadyTimeout: 3 * time.Minute, Log: t.Logf,
		// The aggregator reaches Courier's Pods at their endpoints (the
		// machine routes podCIDR through the node's veth); there is no
		// kube-proxy for ClusterIPs.
		APIServerArgs: []string{"--enable-aggregator-routing=true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	onStop(t, c.stop)
	c.up, c.down, c.edge = c.lenv.Upstream, c.lenv.Downstreams[0], c.lenv.Downstreams[1]
	if c.cs, err = kubernetes.NewForConfig(c.up.Config); err != nil {
		t.Fatal(err)
	}
	if c.downCS, err = kubernetes.NewForConfig(c.down.Config); err != nil {
		t.Fatal(err)
	}
	if c.edgeCS, err = kubernetes.NewForConfig(c.edge.Config); err != nil {
		t.Fatal(err)
	}
	for addr, target := range map[string]string{
		apiserverInNode: c.up.URL, apiserverForPods: c.up.URL, downstreamForPods: c.down.URL,
		edgeInNode: c.edge.URL, edgeForPods: c.edge.URL,
	} {
		l, err := env.netns.listen(addr)
		if err != nil {
			t.Fatal(err)
		}
		c.fwds = append(c.fwds, forward(l, strings.TrimPrefix(target, "https://")))
	}
	// Both clusters' kubernetes Service is 10.0.0.1: the Pod's range says
	// which cluster it is in.
	must(t, env.netns.dnat(ctx, podCIDR, kubernetesVIP, "443", apiserverForPods), "DNAT")
	must(t, env.netns.dnat(ctx, downPodCIDR, kubernetesVIP, "443", edgeForPods), "DNAT")
	if c.downKubeconfig, err = podKubeconfig(c.down.Kubeconfig, "https://"+downstreamForPods); err != nil {
		t.Fatal(err)
	}
	if c.scheduler, err = startScheduler(c.lenv, c.up, filepath.Join(tools, "kube-scheduler"), filepath.Join(env.workDir, "scheduler")); err != nil {
		t.Fatal(err)
	}
	c.kubelet, err = startKubelet(c.lenv, kubeletBin, filepath.Join(env.workDir, "kubelet-"+nodeName), nodeSpec{
		name: nodeName, cluster: c.up, ctrd: env.ctrd, apiserver: apiserverInNode, port: 10250, bridge: "cni0", podCIDR: podCIDR})
	if err != nil {
		t.Fatal(err)
	}
	c.startDownstreamNode(ctx, t, tools, kubeletBin)
	return c
}

// stop stops the kubelet (after deleting every Pod still bound to it, so
// that it tears their sandboxes down), the scheduler, the forwarders and
// the clusters.
func (c *nodeCluster) stop() {
	if c.downKubelet != nil {
		c.deleteAllPods(c.edgeCS)
		c.downKubelet.stop()
	}
	if c.downCtrd != nil {
		if err := c.downCtrd.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "node: clean-up:", err)
		}
	}
	if c.kubelet != nil {
		c.deleteAllPods(c.cs)
		c.kubelet.stop()
	}
	for _, d := range []*daemon{c.scheduler, c.downScheduler} {
		if d != nil {
			d.stop()
		}
	}
	for _, f := range c.fwds {
		_ = f.close()
	}
	c.lenv.Stop()
}

// deleteAllPods deletes every Pod of a cluster and waits up to a minute
// for its kubelet to have stopped them.
func (c *nodeCluster) deleteAllPods(cs kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	zero := int64(0)
	for _, ns := range nss.Items {
		_ = cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

// kubectl runs kubectl as the upstream's (or the downstream's) admin.
func (c *nodeCluster) kubectl(t *testing.T, cl *localenv.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	out, err := c.lenv.Kubectl(ctx, cl, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// podKubeconfig rewrites an admin kubeconfig for Pods: server is where the
// node forwards to it; the certificate names localhost, not that address.
func podKubeconfig(path, server string) ([]byte, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	for _, cl := range kc.Clusters {
		cl.Server = server
		cl.TLSServerName = "localhost"
	}
	return clientcmd.Write(*kc)
}

// daemon is a long-running process of the suite with its log in a file.
type daemon struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

func startDaemon(log, bin string, args ...string) (*daemon, error) {
	d := &daemon{log: log, exited: make(chan struct{})}
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	return d, nil
}

// stop: SIGTERM, then SIGKILL after 20 s.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		fmt.Fprintf(os.Stderr, "node: %s did not stop within 20s of SIGTERM: killing it\n", d.cmd.Path)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// startScheduler runs kube-scheduler (v1.37, hack/build-tools.sh) for
// cl, in the machine's namespace, as system:kube-scheduler (bound by
// the bootstrap RBAC policy), without a serving port or leader election.
func startScheduler(lenv *localenv.Env, cl *localenv.Cluster, bin, dir string) (*daemon, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kubeconfig, _, err := lenv.UserKubeconfig(cl, "system:kube-scheduler")
	if err != nil {
		return nil, err
	}
	return startDaemon(filepath.Join(dir, "kube-scheduler.log"), bin,
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0", "--v=1")
}

// startDownstreamNode gives the edge cluster a node of its own, for
// the agent chart: a second containerd (in the same network namespace,
// its own state, cgroup and bridge) with the pause and courier-agent
// images, a kube-scheduler and a kubelet registering node-2.
func (c *nodeCluster) startDownstreamNode(ctx context.Context, t *testing.T, tools, kubeletBin string) {
	cni := env.ctrd.cniBinDir
	var err error
	c.downCtrd, err = startContainerd(ctx, filepath.Join(env.workDir, "containerd-down"), filepath.Base(env.workDir)+"-down", env.netns.path, cni)
	must(t, err, "the downstream node's containerd")
	for _, archive := range []string{filepath.Join(env.workDir, "pause.oci.tar"), env.images["courier-agent"]} {
		ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		_, err := c.downCtrd.ctr(ictx, "images", "import", archive)
		cancel()
		must(t, err, "importing %s", archive)
	}
	c.downScheduler, err = startScheduler(c.lenv, c.edge, filepath.Join(tools, "kube-scheduler"), filepath.Join(env.workDir, "scheduler-down"))
	must(t, err, "the downstream's scheduler")
	c.downKubelet, err = startKubelet(c.lenv, kubeletBin, filepath.Join(env.workDir, "kubelet-"+downNodeName), nodeSpec{
		name: downNodeName, cluster: c.edge, ctrd: c.downCtrd, apiserver: edgeInNode, port: 10260, bridge: "cni1", podCIDR: downPodCIDR})
	must(t, err, "the downstream's kubelet")
}
