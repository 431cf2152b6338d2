// Package bench measures Courier against real clusters (the same
// environment as test/e2e: etcd, an upstream and two downstream
// kube-apiservers with their kube-controller-managers, all built from source
// by hack/build-tools.sh, and the Courier binary registered with the upstream
// aggregator) and prints one table at the end. See docs/benchmarks.md.
//
// The machine it runs on is small and shared, so the figures that mean
// something are the ratios between Courier and a plain client-go loop
// measured side by side in the same run, never absolute times; nothing here
// asserts on a time. The run fails only on errors; the memory target is
// printed as PASS or FAIL for people to read.
//
// It starts three clusters and takes minutes, so it runs only on request:
// `make bench`, COURIER_BENCH=1, or `go test -run Bench`. Under plain
// `go test ./test/...` (make test) it skips at once.
package bench

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
	// results collects what the scenarios measured, printed by TestMain.
	results = &report{}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if why := skipReason(); why != "" {
		fmt.Println("bench: skipped:", why)
		os.Exit(0)
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: setting up the environment failed:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// skipReason says why the benchmark does not run, or "" when it was asked
// for.
func skipReason() string {
	if testing.Short() {
		return "-short"
	}
	if os.Getenv("COURIER_BENCH") == "1" {
		return ""
	}
	if f := flag.Lookup("test.run"); f != nil && strings.Contains(f.Value.String(), "Bench") {
		return ""
	}
	return "the benchmark starts three real clusters and takes several minutes; " +
		"run it with `make bench` (or COURIER_BENCH=1, or go test -run Bench)"
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	repoRoot, err := localenv.RepoRoot()
	if err != nil {
		return 0, err
	}
	binDir, err := toolsBin(ctx, repoRoot)
	if err != nil {
		return 0, err
	}
	binary := os.Getenv("COURIER_BINARY")
	if binary == "" {
		binary = filepath.Join(repoRoot, "_output", "bin", "courier-apiserver")
		if err := localenv.BuildCourier(ctx, repoRoot, binary); err != nil {
			return 0, err
		}
	}
	fleetCRDs, err := findFleetCRDs(repoRoot)
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "courier-bench-")
	if err != nil {
		return 0, err
	}
	logf := func(format string, args ...any) { fmt.Printf("bench: "+format+"\n", args...) }
	start := time.Now()
	env, err = localenv.Start(ctx, localenv.Options{Dir: dir, BinDir: binDir, Downstreams: 2, ReadyTimeout: 3 * time.Minute, Log: logf})
	if err != nil {
		return 0, err
	}
	defer func() {
		env.Stop()
		if os.Getenv("COURIER_BENCH_KEEP") == "" {
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
	// COURIER_BENCH_ARGS adds flags to Courier (for example -v=2 to see
	// where its time goes); the default is Courier as users run it.
	args := strings.Fields(os.Getenv("COURIER_BENCH_ARGS"))
	courier, err = env.StartCourier(ctx, localenv.CourierOptions{Binary: binary, RepoRoot: repoRoot, Args: args})
	if err != nil {
		return 0, err
	}
	logf("courier available in %s (pid %d, log %s, extra args %q)", time.Since(start).Round(time.Second), courier.Pid(), courier.LogPath, args)

	load := loadAverage()
	code := m.Run()
	results.note("load average (1, 5, 15 min; other work shares this machine): %s before the scenarios, %s after", load, loadAverage())
	results.print(os.Stdout)
	if code != 0 {
		fmt.Println("bench: last lines of Courier's log:\n" + localenv.Tail(courier.LogPath, 40))
	}
	return code, nil
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// toolsBin returns the directory of the Kubernetes and etcd binaries:
// $COURIER_TOOLS_BIN, else what hack/build-tools.sh builds or finds cached.
func toolsBin(ctx context.Context, repoRoot string) (string, error) {
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
// shared/fleet-crds directory next to the repository (as test/e2e does).
func findFleetCRDs(repoRoot string) (string, error) {
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

// TestBench runs the scenarios in a fixed order: memory first, on a fresh
// Courier, because Go's heap does not shrink back after the fan-out runs
// and freed memory would hide growth; then fan-out for each N.
func TestBench(t *testing.T) {
	t.Run("memory", testMemory)
	for _, n := range intsFromEnv(t, "COURIER_BENCH_N", []int{10, 50}) {
		t.Run(fmt.Sprintf("fanout-%d", n), func(t *testing.T) { testFanout(t, n) })
	}
}
