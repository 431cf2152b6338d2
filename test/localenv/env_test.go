package localenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// TestEnvSelfTest brings up real clusters and checks what the other suites
// rely on: kubectl works on each cluster, a user certificate is subject to
// RBAC (and is refused by another cluster), a stopped downstream comes back
// on the same port with its data, Courier becomes Available through the
// aggregator, and Stop leaves no process behind.
//
// It runs in `make test` with the suites (about half a minute: three
// clusters, one restart, one Courier): the suites take these for granted,
// and only here would a change to the environment that breaks them fail by
// name. Like the suites, it finds or builds the tools (COURIER_TOOLS_BIN,
// else hack/build-tools.sh) and Courier (COURIER_BINARY, else
// BuildCourier), and is skipped only in -short mode.
func TestEnvSelfTest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters; skipped in -short mode, as the suites are")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := ToolsBin(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	courierBinary := os.Getenv("COURIER_BINARY")
	if courierBinary == "" {
		courierBinary = filepath.Join(t.TempDir(), "courier-apiserver")
		if err := BuildCourier(ctx, root, courierBinary); err != nil {
			t.Fatal(err)
		}
	}

	began := time.Now()
	env, err := Start(ctx, Options{Dir: t.TempDir(), BinDir: binDir, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	t.Logf("bring-up took %s", time.Since(began).Round(100*time.Millisecond))

	for _, c := range env.Clusters() {
		out, err := env.Kubectl(ctx, c, "get", "ns", "-o", "name")
		if err != nil || !strings.Contains(out, "namespace/kube-system") {
			t.Errorf("%s: kubectl get ns = %q, %v", c.Name, out, err)
		}
	}

	t.Run("user certificate is subject to RBAC", func(t *testing.T) {
		d := env.Downstreams[0]
		_, cfg, err := env.UserKubeconfig(d, "alice", "dev")
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		_, err = cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("list secrets as alice: %v, want Forbidden", err)
		}
		if !strings.Contains(err.Error(), `"alice"`) {
			t.Errorf("error does not name the user: %v", err)
		}
		// The same certificate must not work on another cluster.
		cfg.Host = env.Downstreams[1].URL
		cfg.CAData = env.Downstreams[1].Config.CAData
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("alice's certificate on another cluster: %v, want Unauthorized", err)
		}
	})

	t.Run("downstream stops and starts on the same port with its data", func(t *testing.T) {
		d := env.Downstreams[1]
		if _, err := env.Kubectl(ctx, d, "create", "configmap", "survivor", "--from-literal=k=v"); err != nil {
			t.Fatal(err)
		}
		d.Stop()
		if _, err := env.Kubectl(ctx, d, "get", "ns", "--request-timeout=3s"); err == nil {
			t.Fatal("kubectl still works after Stop")
		}
		stopped := time.Now()
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart took %s", time.Since(stopped).Round(100*time.Millisecond))
		out, err := env.Kubectl(ctx, d, "get", "configmap", "survivor", "-o", "jsonpath={.data.k}")
		if err != nil || out != "v" {
			t.Fatalf("configmap after restart = %q, %v", out, err)
		}
	})

	t.Run("Courier becomes Available through the aggregator", func(t *testing.T) {
		// Courier's caches, and so its /readyz, need the Fleet CRDs.
		if _, err := env.Kubectl(ctx, env.Upstream, "apply", "-f", filepath.Join(root, "artifacts", "crds")); err != nil {
			t.Fatal(err)
		}
		c, err := env.StartCourier(ctx, CourierOptions{Binary: courierBinary})
		if err != nil {
			t.Fatal(err)
		}
		out, err := env.Kubectl(ctx, env.Upstream, "get", "apiservice", APIServiceName)
		t.Logf("%s", out)
		if err != nil {
			t.Fatal(err)
		}
		// Through the aggregator, Courier sees the caller (front-proxy
		// headers) and asks the upstream RBAC about them.
		if _, err := env.Kubectl(ctx, env.Upstream, "get", "downstreamcopies", "-A"); err != nil {
			t.Errorf("admin: %v", err)
		}
		_, cfg, err := env.UserKubeconfig(env.Upstream, "bob")
		if err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: "courier.dev", Version: "v1alpha1", Resource: "downstreamcopies"}
		_, err = dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"bob"`) {
			t.Errorf("bob lists downstreamcopies: %v, want Forbidden naming bob", err)
		}
		c.Stop()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
	})

	env.Stop()
	env.Stop() // idempotent
	data, err := os.ReadFile(filepath.Join(env.Dir(), "pids"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 7 { // etcd + 3 × (kube-apiserver, kube-controller-manager), + restarts
		t.Errorf("only %d processes recorded: %q", len(lines), lines)
	}
	for _, line := range lines {
		pidStr, _, _ := strings.Cut(line, " ")
		pid, err := strconv.Atoi(pidStr)
		if err != nil {
			t.Fatalf("bad pids line %q", line)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("pid %d (%s) still alive after Stop", pid, line)
		}
		if out, err := exec.Command("pgrep", "-g", pidStr).Output(); err == nil {
			t.Errorf("process group %d still has processes after Stop: %s", pid, out)
		}
	}
}
