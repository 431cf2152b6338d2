package localenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// SuiteOptions configures StartSuite.
type SuiteOptions struct {
	// Name prefixes log lines and the work directory ("e2e", "bench").
	Name string
	// CourierArgs are extra flags for Courier.
	CourierArgs []string
	// Keep leaves the work directory (logs, audit logs) after Stop.
	Keep bool
	// Profiling serves /debug/pprof on the kube-apiservers (Options).
	Profiling bool
}

// Suite is what a test package runs against: real clusters with Fleet's
// CRDs installed upstream and Courier registered as an APIService.
type Suite struct {
	Env     *Env
	Courier *Courier
	// RepoRoot is the repository's top directory.
	RepoRoot string
	// FleetCRDs is the directory of the CRDs installed upstream: Fleet's
	// real ones when found, else Courier's own (RealFleetCRDs false).
	FleetCRDs     string
	RealFleetCRDs bool
	// BinDir holds kube-apiserver, kube-controller-manager, kubectl, etcd.
	BinDir string

	dir  string
	keep bool
	logf func(string, ...any)
}

// StartSuite finds or builds the tools (COURIER_TOOLS_BIN, else
// hack/build-tools.sh) and Courier (COURIER_BINARY, else BuildCourier),
// starts an upstream and two downstream clusters, installs Fleet's CRDs
// (FindFleetCRDs: the real ones, or Courier's own in a bare clone) and starts Courier. Stop undoes it all.
func StartSuite(ctx context.Context, o SuiteOptions) (_ *Suite, err error) {
	s := &Suite{keep: o.Keep, logf: func(format string, args ...any) { fmt.Printf(o.Name+": "+format+"\n", args...) }}
	if s.RepoRoot, err = RepoRoot(); err != nil {
		return nil, err
	}
	if s.BinDir, err = ToolsBin(ctx, s.RepoRoot); err != nil {
		return nil, err
	}
	binary := os.Getenv("COURIER_BINARY")
	if binary == "" {
		binary = filepath.Join(s.RepoRoot, "_output", "bin", "courier-apiserver")
		if err := BuildCourier(ctx, s.RepoRoot, binary); err != nil {
			return nil, err
		}
	}
	var realCRDs bool
	if s.FleetCRDs, realCRDs, err = FindFleetCRDs(s.RepoRoot); err != nil {
		return nil, err
	}
	if realCRDs {
		s.logf("using Fleet's real CRDs from %s", s.FleetCRDs)
	} else {
		s.logf("Fleet's CRDs not found (no ../shared/fleet-crds, no COURIER_FLEET_CRDS): using Courier's own CRDs from %s", s.FleetCRDs)
	}
	s.RealFleetCRDs = realCRDs
	if s.dir, err = os.MkdirTemp("", "courier-"+o.Name+"-"); err != nil {
		return nil, err
	}
	start := time.Now()
	s.Env, err = Start(ctx, Options{Dir: s.dir, BinDir: s.BinDir, Downstreams: 2, ReadyTimeout: 3 * time.Minute, Log: s.logf, Profiling: o.Profiling})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	s.logf("clusters ready in %s", time.Since(start).Round(time.Second))
	if _, err := s.Env.Kubectl(ctx, s.Env.Upstream, "apply", "-f", s.FleetCRDs); err != nil {
		return nil, fmt.Errorf("installing Fleet's CRDs: %w", err)
	}
	if err := s.Env.WaitEstablished(ctx, "helmops.fleet.cattle.io", "clusters.fleet.cattle.io", "clustergroups.fleet.cattle.io"); err != nil {
		return nil, err
	}
	if s.Courier, err = s.Env.StartCourier(ctx, CourierOptions{Binary: binary, RepoRoot: s.RepoRoot, Args: o.CourierArgs}); err != nil {
		return nil, err
	}
	s.logf("courier available in %s (pid %d, log %s)", time.Since(start).Round(time.Second), s.Courier.Pid(), s.Courier.LogPath)
	return s, nil
}

// Stop stops every process and removes the work directory unless kept.
func (s *Suite) Stop() {
	s.Env.Stop()
	if s.keep {
		s.logf("kept %s", s.dir)
		return
	}
	_ = os.RemoveAll(s.dir)
}

// ToolsBin returns the directory of the Kubernetes and etcd binaries:
// $COURIER_TOOLS_BIN, else what hack/build-tools.sh builds or finds cached.
func ToolsBin(ctx context.Context, repoRoot string) (string, error) {
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

// FindFleetCRDs returns the CRDs to install upstream: Fleet's real ones
// ($COURIER_FLEET_CRDS, else the shared/fleet-crds directory next to the
// repository, as CI lays it out), or, in a clone that has neither, Courier's
// own schema-compatible CRDs under artifacts/crds. real says which.
func FindFleetCRDs(repoRoot string) (dir string, real bool, err error) {
	if env := os.Getenv("COURIER_FLEET_CRDS"); env != "" {
		if _, err := os.Stat(filepath.Join(env, "helmops.yaml")); err != nil {
			return "", false, fmt.Errorf("COURIER_FLEET_CRDS=%s holds no helmops.yaml: %w", env, err)
		}
		return env, true, nil
	}
	shared := filepath.Join(repoRoot, "..", "shared", "fleet-crds")
	if _, err := os.Stat(filepath.Join(shared, "helmops.yaml")); err == nil {
		return shared, true, nil
	}
	own := filepath.Join(repoRoot, "artifacts", "crds")
	if _, err := os.Stat(filepath.Join(own, "helmops.fleet.cattle.io.yaml")); err != nil {
		return "", false, fmt.Errorf("no CRDs to install: neither Fleet's (COURIER_FLEET_CRDS, ../shared/fleet-crds) nor Courier's own (artifacts/crds): %w", err)
	}
	return own, false, nil
}

// SuiteMain is the body of a suite package's TestMain (after flag.Parse):
// when skip is not "" it prints "<name>: skipped: <skip>" and exits 0 (so
// `go test ./test/...` passes by it quickly); otherwise it exits with
// run's code, or 1 when run could not set up the environment.
func SuiteMain(name, skip string, run func() (int, error)) {
	if skip != "" {
		fmt.Println(name+": skipped:", skip)
		os.Exit(0)
	}
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+": setting up the environment failed:", err)
		os.Exit(1)
	}
	os.Exit(code)
}
