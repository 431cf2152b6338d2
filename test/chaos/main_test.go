// Package chaos runs Courier against real clusters (test/localenv: etcd,
// an upstream and two downstream kube-apiservers with their
// kube-controller-managers, all built from source, and the Courier binary
// registered with the upstream aggregator), hurts it, and counts the
// damage (docs/reliability.md): SIGKILL during a fan-out, a downstream
// kube-apiserver down, the upstream kube-apiserver restarted and etcd
// paused, and a catalogue of bad input. It prints one table at the end;
// docs/reliability.md holds one, with what each figure means. A scenario
// fails the run when its "nothing lost" condition breaks.
//
// It takes about 10 minutes on 2 cores, so it runs only with
// COURIER_CHAOS=1 (`make chaos`). `make test` runs ./test/... too: there
// the package compiles and TestMain exits at once, saying so.
package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
	"github.com/courier-dev/courier/test/localenv"
)

var (
	env     *localenv.Env
	courier *localenv.Courier
	suite   *localenv.Suite
	results = &table{}
)

// courierArgs: field copies into ConfigMaps, for the bad-input catalogue.
var courierArgs = []string{"--fieldcopy-target=configmaps"}

func TestMain(m *testing.M) {
	flag.Parse()
	skip := ""
	if os.Getenv("COURIER_CHAOS") != "1" {
		skip = "the chaos run starts three real clusters and takes about 10 minutes; run it with `make chaos` (COURIER_CHAOS=1)"
	}
	localenv.SuiteMain("chaos", skip, func() (int, error) { return run(m) })
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	suite, err = localenv.StartSuite(ctx, localenv.SuiteOptions{Name: "chaos",
		CourierArgs: append(courierArgs, strings.Fields(os.Getenv("COURIER_CHAOS_ARGS"))...), Keep: os.Getenv("COURIER_CHAOS_KEEP") != ""})
	if err != nil {
		return 0, err
	}
	defer suite.Stop()
	env, courier = suite.Env, suite.Courier
	began := time.Now()
	code := m.Run()
	results.note("scenarios took %s; load average (1, 5, 15 min) at the end: %s", time.Since(began).Round(time.Second), fleetsim.LoadAverage())
	results.print(os.Stdout)
	if code != 0 {
		fmt.Println("chaos: last lines of Courier's log:\n" + localenv.Tail(courier.LogPath, 40))
	}
	return code, nil
}

// TestChaos runs the scenarios in order. The first builds the simulated
// fleet that the next two hurt again; the catalogue uses it as its
// positive control.
func TestChaos(t *testing.T) {
	f := &fleetRun{}
	if !t.Run("kill-during-fan-out", func(t *testing.T) { testKill(t, f) }) && !f.ready {
		t.Fatal("the fleet of scenario 1 is not there: the other scenarios need it")
	}
	t.Run("downstream-down", func(t *testing.T) { testDownstreamDown(t, f) })
	t.Run("upstream-restart", func(t *testing.T) { testUpstreamRestart(t, f) })
	t.Run("etcd-paused", func(t *testing.T) { testEtcdPaused(t, f) })
	t.Run("bad-input", func(t *testing.T) { testBadInput(t, f) })
}

func fleetClient(t *testing.T) versioned.Interface {
	t.Helper()
	fc, err := versioned.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	return fc
}
