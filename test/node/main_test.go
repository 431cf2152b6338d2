// Package node runs Courier as users run it, on a real container runtime
// (docs/design.md#tests-against-real-servers): its own containerd (Debian's 1.6, installed by
// hack/install-node-deps.sh) with root, state and socket under a temporary
// work directory, a pause image built here, and the images `make image`
// wrote imported with `ctr images import`, never pulled. It checks the
// images themselves (each binary runs under containerd and prints its
// version, as the image's non-root user; the arm64 image holds an aarch64
// binary; `make image` twice gives the same digests), then TestNode runs
// kubelets v1.35 (COURIER_KUBELET_BIN, from hack/build-kubelet.sh) for
// test/localenv's upstream and a pulled downstream cluster, and installs,
// upgrades and uninstalls both charts with helm (COURIER_HELM_BIN) as
// docs/install.md and docs/pull.md say.
//
// It needs root and changes the machine (containerd, mounts, cgroups), so
// it runs only with COURIER_NODE=1 (`make test-node`). `make test` runs
// ./test/... too: there the package compiles and TestMain exits at once,
// saying so.
//
// Everything it makes lives in its work directory (COURIER_NODE_KEEP=1
// keeps it), except the node's network namespace courier-node-<suffix>
// (`ip netns`; containerd runs in it, with loopback and a veth pair, one end
// holding 198.18.0.2, the other 198.18.0.1 in the machine's namespace, which
// routes only the Pods' range through it; netns_test.go),
// what containerd 1.6 puts in /run/containerd whatever its config says
// (shim sockets, runc state; removed when empty) and the cgroup
// /courier-node-<suffix> its containers run in; all removed at the end.
// Containers run with ctr get a network namespace with nothing but
// loopback; Pods get the node's bridge. Nothing listens on the machine's
// own interfaces: the CRI stream servers and kubelets listen on the node
// namespace's 127.0.0.1, the suite's forwarders (to the kube-apiservers on
// the machine's 127.0.0.1) there and on 198.18.0.2.
package node

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// env is the suite's environment, set up by TestMain.
var env struct {
	repoRoot  string
	imagesDir string
	workDir   string
	netns     *nodeNetns
	ctrd      *containerd
	// images maps each component (courier-apiserver, courier-agent) to its
	// archive from `make image`.
	images map[string]string
	// upgradeImages: the same for the second `make image` with another
	// IMAGE_TAG (COURIER_UPGRADE_IMAGES_DIR), for the upgrade step.
	upgradeImages map[string]string

	// stops are what tests started that stopEnv must stop first when a
	// signal ends the run before their own clean-up (onStop).
	mu    sync.Mutex
	stops []func()
}

// onStop runs stop once: at the end of t, or from stopEnv when a signal
// ends the run first.
func onStop(t *testing.T, stop func()) {
	var once sync.Once
	f := func() { once.Do(stop) }
	env.mu.Lock()
	env.stops = append(env.stops, f)
	env.mu.Unlock()
	t.Cleanup(f)
}

// suiteTimeout bounds the whole run, below `make test-node`'s go test
// -timeout so that the clean-up always runs.
const suiteTimeout = 40 * time.Minute

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("COURIER_NODE") != "1" {
		fmt.Println("node: skipped: the node suite needs root and starts its own containerd; run it with `make test-node` (COURIER_NODE=1)")
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "node: the node suite must run as root (it starts containerd, mounts and makes cgroups); run `make test-node` as root")
		os.Exit(1)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	var once sync.Once
	teardown := func() { once.Do(stopEnv) }
	defer teardown()
	// An interrupted run still stops containerd and unmounts.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "node: %v: cleaning up\n", s)
		cancel()
		teardown()
		os.Exit(1)
	}()
	if err := startEnv(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "node: setting up the environment failed:", err)
		return 1
	}
	return m.Run()
}

// startEnv makes the work directory, starts containerd in it and imports
// the pause image and both Courier images.
func startEnv(ctx context.Context) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	env.repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	env.imagesDir = os.Getenv("COURIER_IMAGES_DIR")
	if env.imagesDir == "" {
		env.imagesDir = filepath.Join(env.repoRoot, "_output", "images")
	}
	env.images = map[string]string{}
	for _, c := range []string{"courier-apiserver", "courier-agent"} {
		p := filepath.Join(env.imagesDir, c+".oci.tar")
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (run `make image` first, or `make test-node`)", err)
		}
		env.images[c] = p
	}
	env.upgradeImages = map[string]string{}
	if dir := os.Getenv("COURIER_UPGRADE_IMAGES_DIR"); dir != "" {
		for _, c := range []string{"courier-apiserver", "courier-agent"} {
			env.upgradeImages[c] = filepath.Join(dir, c+".oci.tar")
		}
	}
	cni := os.Getenv("COURIER_NODE_CNI_BIN")
	if cni == "" {
		cni = "/usr/lib/cni"
	}
	// Short: unix socket paths must fit in 108 bytes.
	if env.workDir, err = os.MkdirTemp("", "courier-node-"); err != nil {
		return err
	}
	fmt.Println("node: work directory", env.workDir)
	began := time.Now()
	name := filepath.Base(env.workDir)
	if env.netns, err = newNodeNetns(ctx, name); err != nil {
		return err
	}
	env.ctrd, err = startContainerd(ctx, filepath.Join(env.workDir, "containerd"), name, env.netns.path, cni)
	if err != nil {
		return err
	}
	pause, err := buildPauseImage(ctx, env.repoRoot, env.workDir)
	if err != nil {
		return err
	}
	archives := []string{pause, env.images["courier-apiserver"], env.images["courier-agent"]}
	if a := env.upgradeImages["courier-apiserver"]; a != "" {
		archives = append(archives, a)
	}
	for _, archive := range archives {
		ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		out, err := env.ctrd.ctr(ictx, "images", "import", archive)
		cancel()
		if err != nil {
			return err
		}
		fmt.Print("node: ", out)
	}
	fmt.Printf("node: containerd up, images imported in %s\n", time.Since(began).Round(time.Second))
	return nil
}

// stopEnv stops containerd and removes what the suite made.
func stopEnv() {
	env.mu.Lock()
	stops := env.stops
	env.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if env.ctrd != nil {
		if err := env.ctrd.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "node: clean-up:", err)
		}
	}
	if env.netns != nil {
		if err := env.netns.remove(); err != nil {
			fmt.Fprintln(os.Stderr, "node: clean-up:", err)
		}
	}
	if env.workDir == "" {
		return
	}
	// A kubelet's volumes, if any are left.
	if err := unmountUnder(env.workDir); err != nil {
		fmt.Fprintln(os.Stderr, "node: clean-up:", err)
	}
	if mounts, err := mountsUnder(env.workDir); err != nil || len(mounts) > 0 {
		fmt.Fprintf(os.Stderr, "node: still mounted under %s (%v): %v; the work directory is kept\n", env.workDir, err, mounts)
		return
	}
	if os.Getenv("COURIER_NODE_KEEP") != "" {
		fmt.Println("node: kept", env.workDir)
		return
	}
	if err := os.RemoveAll(env.workDir); err != nil {
		fmt.Fprintln(os.Stderr, "node: clean-up:", err)
	}
}
