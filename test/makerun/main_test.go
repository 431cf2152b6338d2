// Package makerun tests what `make run` brings up, brought up the same way
// (package test/localenv/localup, which hack/localup runs): the upstream,
// downstream-1 pushed, downstream-2 pulled by a courier-agent process,
// Courier, the admission policies and the example HelmOp `example` with
// its sources, in a temporary directory on ports of its own. It is started
// once for the package (TestMain) and stopped at the end.
package makerun

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/courier-dev/courier/test/localenv"
	"github.com/courier-dev/courier/test/localenv/localup"
)

var (
	setup *localup.Setup
	// plugin is the kubectl-courier binary built from this checkout.
	plugin string
	// binDir holds kubectl, among the tools.
	binDir string
)

func TestMain(m *testing.M) {
	flag.Parse()
	skip := ""
	if testing.Short() {
		skip = "-short"
	}
	localenv.SuiteMain("makerun", skip, func() (int, error) { return run(m) })
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := localenv.RepoRoot()
	if err != nil {
		return 0, err
	}
	if binDir, err = localenv.ToolsBin(ctx, root); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "courier-makerun-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	c := localup.Defaults(root)
	c.Dir, c.BinDir = filepath.Join(dir, "local"), binDir
	c.Log = func(format string, args ...any) { fmt.Printf("makerun: "+format+"\n", args...) }
	if c.CourierBinary = os.Getenv("COURIER_BINARY"); c.CourierBinary == "" {
		c.CourierBinary = filepath.Join(dir, "courier-apiserver")
		if err := localenv.BuildCourier(ctx, root, c.CourierBinary); err != nil {
			return 0, err
		}
	}
	if c.AgentBinary, err = localenv.AgentBinary(ctx, root); err != nil {
		return 0, err
	}
	// The plugin as `make build` builds it, from this checkout.
	plugin = filepath.Join(dir, "bin", "kubectl-courier")
	build := exec.CommandContext(ctx, "go", "build", "-o", plugin, "./cmd/kubectl-courier")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building kubectl-courier: %v: %s", err, out)
	}
	began := time.Now()
	if setup, err = localup.Up(ctx, c); err != nil {
		return 0, err
	}
	defer setup.Stop()
	fmt.Printf("makerun: make run's setup up in %s\n", time.Since(began).Round(time.Second))
	code := m.Run()
	if code != 0 {
		fmt.Println("makerun: last lines of Courier's log:\n" + localenv.Tail(setup.Courier.LogPath, 40))
	}
	return code, nil
}
