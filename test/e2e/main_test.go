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
	suite, err := localenv.StartSuite(ctx, localenv.SuiteOptions{Name: "e2e", Keep: os.Getenv("COURIER_E2E_KEEP") != "",
		// --v=2 logs every copy written: the tests read the log, and check
		// that no secret value ever reaches it.
		CourierArgs: append([]string{"-v=2"}, fieldCopyArgs...)})
	if err != nil {
		return 0, err
	}
	defer suite.Stop()
	env, courier = suite.Env, suite.Courier
	repoRoot, fleetCRDs, binDir = suite.RepoRoot, suite.FleetCRDs, suite.BinDir
	code := m.Run()
	if code != 0 {
		fmt.Println("e2e: last lines of Courier's log:\n" + localenv.Tail(courier.LogPath, 40))
	}
	return code, nil
}
