// Package e2e runs Courier against real clusters: etcd, an upstream and two
// downstream kube-apiservers (each with a kube-controller-manager), all
// built from source by hack/build-tools.sh, the real kubectl, and the
// Courier binary registered with the upstream aggregator. The environment
// is started once for the package (TestMain) and stopped at the end.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-dev/courier/test/localenv"
)

var (
	env     *localenv.Env
	courier *localenv.Courier
	// repoRoot is the repository's top directory.
	repoRoot string
	// fleetCRDs is the directory of Fleet's real CRDs installed upstream.
	fleetCRDs string
	// binDir holds kube-apiserver, kube-controller-manager, kubectl, etcd.
	binDir string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up the environment failed:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	if repoRoot, err = localenv.RepoRoot(); err != nil {
		return 0, err
	}
	if binDir, err = toolsBin(ctx); err != nil {
		return 0, err
	}
	binary := os.Getenv("COURIER_BINARY")
	if binary == "" {
		binary = filepath.Join(repoRoot, "_output", "bin", "courier-apiserver")
		if err := localenv.BuildCourier(ctx, repoRoot, binary); err != nil {
			return 0, err
		}
	}
	if fleetCRDs, err = findFleetCRDs(); err != nil {
		return 0, err
	}

	dir, err := os.MkdirTemp("", "courier-e2e-")
	if err != nil {
		return 0, err
	}
	logf := func(format string, args ...any) { fmt.Printf("e2e: "+format+"\n", args...) }
	start := time.Now()
	env, err = localenv.Start(ctx, localenv.Options{Dir: dir, BinDir: binDir, Downstreams: 2, ReadyTimeout: 3 * time.Minute, Log: logf})
	if err != nil {
		return 0, err
	}
	defer func() {
		env.Stop()
		if os.Getenv("COURIER_E2E_KEEP") == "" {
			_ = os.RemoveAll(dir)
		} else {
			logf("kept %s", dir)
		}
	}()
	logf("clusters ready in %s", time.Since(start).Round(time.Second))

	if _, err := env.Kubectl(ctx, env.Upstream, "apply", "-f", fleetCRDs); err != nil {
		return 0, fmt.Errorf("installing Fleet's CRDs: %w", err)
	}
	if _, err := env.Kubectl(ctx, env.Upstream, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/helmops.fleet.cattle.io", "crd/clusters.fleet.cattle.io", "crd/clustergroups.fleet.cattle.io"); err != nil {
		return 0, err
	}
	courier, err = env.StartCourier(ctx, localenv.CourierOptions{Binary: binary, RepoRoot: repoRoot})
	if err != nil {
		return 0, err
	}
	logf("courier available in %s (log %s)", time.Since(start).Round(time.Second), courier.LogPath)
	code := m.Run()
	if code != 0 {
		fmt.Println("e2e: last lines of Courier's log:\n" + localenv.Tail(courier.LogPath, 40))
	}
	return code, nil
}

// toolsBin returns the directory of the Kubernetes and etcd binaries, built
// (or found in the cache) by hack/build-tools.sh.
func toolsBin(ctx context.Context) (string, error) {
	if dir := os.Getenv("COURIER_TOOLS_BIN"); dir != "" {
		return dir, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack", "build-tools.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-tools.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// findFleetCRDs returns Fleet's real CRDs: $COURIER_FLEET_CRDS, else the
// shared/fleet-crds directory next to the repository. The suite proves
// Courier against them and, in TestOwnCRDs, against artifacts/crds.
func findFleetCRDs() (string, error) {
	for _, dir := range []string{os.Getenv("COURIER_FLEET_CRDS"), filepath.Join(repoRoot, "..", "shared", "fleet-crds")} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "helmops.yaml")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("Fleet's CRDs not found: set COURIER_FLEET_CRDS to a directory holding helmops.yaml, clusters.yaml and clustergroups.yaml")
}
