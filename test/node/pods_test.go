package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// pauseDeployment is a Deployment of the suite's pause image: what the
// scheduler must place and the kubelet run, with a Pod address from the
// node's bridge.
const pauseDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: pause
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: pause}
  template:
    metadata:
      labels: {app: pause}
    spec:
      automountServiceAccountToken: false
      containers:
      - name: pause
        image: ` + pauseRef + `
        imagePullPolicy: Never
`

// testPodsRun: a Deployment's Pods are scheduled (by kube-scheduler, not
// by a nodeName in the spec), run, and get addresses in podCIDR; the
// aggregator's path to them exists: the machine routes podCIDR through the
// node's veth.
func testPodsRun(t *testing.T, c *nodeCluster) {
	path := filepath.Join(env.workDir, "pause-deployment.yaml")
	if err := os.WriteFile(path, []byte(pauseDeployment), 0o600); err != nil {
		t.Fatal(err)
	}
	c.kubectl(t, c.up, "apply", "-f", path)
	c.kubectl(t, c.up, "-n", "default", "rollout", "status", "deployment/pause", "--timeout=3m")
	pods := podsOf(t, c.cs, "default", "app=pause")
	_, pn, _ := net.ParseCIDR(podCIDR)
	for _, p := range pods {
		if p.Spec.NodeName != nodeName || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q, phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		if ip := net.ParseIP(p.Status.PodIP); ip == nil || !pn.Contains(ip) {
			t.Errorf("pod %s: address %q, not in %s", p.Name, p.Status.PodIP, podCIDR)
		}
	}
	events := c.kubectl(t, c.up, "-n", "default", "get", "events", "--field-selector", "reason=Scheduled",
		"-o", "jsonpath={range .items[*]}{.reportingComponent}{\" \"}{.involvedObject.name}{\"\\n\"}{end}")
	for _, p := range pods {
		if !strings.Contains(events, "default-scheduler "+p.Name) {
			t.Errorf("pod %s has no Scheduled event from default-scheduler; events:\n%s", p.Name, events)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("pods %s and %s running at %s and %s", pods[0].Name, pods[1].Name, pods[0].Status.PodIP, pods[1].Status.PodIP)
	c.kubectl(t, c.up, "-n", "default", "delete", "deployment", "pause", "--wait=true")
}

// podsOf lists the Pods matching selector, failing the test on error.
func podsOf(t *testing.T, cs kubernetes.Interface, ns, selector string) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// eventually polls check every second until it returns true or timeout
// passes, then fails the test with check's last message.
func eventually(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, msg)
		}
		time.Sleep(time.Second)
	}
}

// must fails the test on err.
func must(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}
