// Package bench measures Courier against real clusters (the same
// environment as test/e2e: etcd, an upstream and two downstream
// kube-apiservers with their kube-controller-managers, all built from source
// by hack/build-tools.sh, and the Courier binary registered with the upstream
// aggregator) and prints one table at the end. See docs/benchmarks.md.
//
// The machine it runs on is small and shared, so the figures that mean
// something are the ratios between Courier and a plain client-go pool (or,
// for lists, the kube-apiserver) measured side by side in the same run,
// never absolute times; nothing here asserts on a time. The run fails only
// on errors; each figure's target is printed with PASS or FAIL for people
// to read.
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
	"strings"
	"testing"
	"time"

	"github.com/courier-dev/courier/test/fleetsim"
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
	localenv.SuiteMain("bench", skipReason(), func() (int, error) { return run(m) })
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
	// COURIER_BENCH_ARGS adds flags to Courier (for example -v=2 to see
	// where its time goes); the default is Courier as users run it.
	suite, err := localenv.StartSuite(ctx, localenv.SuiteOptions{Name: "bench",
		CourierArgs: strings.Fields(os.Getenv("COURIER_BENCH_ARGS")), Keep: os.Getenv("COURIER_BENCH_KEEP") != "",
		Profiling: profileServersToo()})
	if err != nil {
		return 0, err
	}
	defer suite.Stop()
	env, courier = suite.Env, suite.Courier

	load := fleetsim.LoadAverage()
	code := m.Run()
	results.note("load average (1, 5, 15 min; other work shares this machine): %s before the scenarios, %s after", load, fleetsim.LoadAverage())
	results.print(os.Stdout)
	if code != 0 {
		fmt.Println("bench: last lines of Courier's log:\n" + localenv.Tail(courier.LogPath, 40))
	}
	return code, nil
}

// TestBench runs the scenarios in a fixed order: memory first, on a fresh
// Courier, because Go's heap does not shrink back after the scale runs
// and freed memory would hide growth; then memory with field copies on, on
// a Courier restarted with those flags (and restarted without them after);
// then the scale benchmark for each N, smallest first; then
// the scale-out case on the largest N's Clusters, and kubectl courier
// status on them; last what replicas cost the upstream at rest.
func TestBench(t *testing.T) {
	t.Run("memory", testMemory)
	t.Run("fieldcopy-memory", testFieldCopyMemory)
	t.Run("pull", testPull)
	ns := intsFromEnv(t, "COURIER_BENCH_N", []int{100, 1000})
	for i, n := range ns {
		t.Run(fmt.Sprintf("scale-%d", n), func(t *testing.T) { testScale(t, n, i == len(ns)-1) })
	}
	// Last: it shares the last scale case's Clusters among replicas.
	if len(ns) > 0 && os.Getenv("COURIER_BENCH_SCALEOUT") != "0" {
		t.Run(fmt.Sprintf("scaleout-%d", ns[len(ns)-1]), func(t *testing.T) { testScaleOut(t, ns[len(ns)-1]) })
	}
	// Then kubectl courier status on the last N's Clusters (run alone, on
	// the same setup made for it).
	if len(ns) > 0 {
		n := ns[len(ns)-1]
		t.Run(fmt.Sprintf("plugin-status-%d", n), func(t *testing.T) { testPluginStatus(t, n) })
	}
	t.Run("rest", testRest)
}
