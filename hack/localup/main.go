// Command localup runs Courier locally against real clusters, for `make run`
// and `make down`:
//
//	go run ./hack/localup up     start upstream + downstream clusters, Courier and an agent, return when ready
//	go run ./hack/localup down   stop everything `up` started
//
// downstream-1 is pushed (its Cluster has a kubeconfig Secret);
// downstream-2 is pulled by a courier-agent process. What runs is set up by
// package test/localenv/localup, which tests bring up the same way.
//
// `up` builds the tools (hack/build-tools.sh), Courier and the agent, then starts a
// detached supervisor (`localup serve`, in its own session so it outlives
// `make` and the terminal's Ctrl-C) that owns every process, sets up Fleet
// objects and Courier, and writes a ready file. `down` signals the
// supervisor, which stops its children. Everything lives in _output/local:
// kubeconfigs, logs/ (localup.log is the supervisor's own), certificates.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/courier-dev/courier/test/localenv"
	"github.com/courier-dev/courier/test/localenv/localup"
)

const (
	pidFile   = "localup.pid"
	readyFile = "ready"
	// upTimeout covers a cold start on a small machine: three clusters
	// starting together, CRDs, Courier and its APIService.
	upTimeout = 10 * time.Minute
	workspace = localup.Workspace
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type config struct {
	dir         string
	binDir      string
	crds        string
	admission   string
	example     string
	fcExample   string
	courier     string
	agent       string
	downstreams int
	courierArgs stringList
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var c config
	// The defaults are the test's (test/makerun): paths relative to the
	// repository, where main changes directory to.
	d := localup.Defaults(".")
	fs := flag.NewFlagSet("localup "+cmd, flag.ExitOnError)
	fs.StringVar(&c.dir, "dir", "_output/local", "work directory (wiped by up)")
	fs.StringVar(&c.binDir, "bin-dir", "", "directory with kube-apiserver, kube-controller-manager, kubectl, etcd (default: output of hack/build-tools.sh)")
	fs.StringVar(&c.crds, "crds", d.CRDs, "Fleet CRDs to install (the real ones are in ../shared/fleet-crds)")
	fs.StringVar(&c.admission, "admission", d.Admission, "admission policies installed upstream (as the chart installs them) after --example, before --fieldcopy-example")
	fs.StringVar(&c.example, "example", d.Example, "manifest applied to the upstream cluster after the Fleet objects")
	fs.StringVar(&c.fcExample, "fieldcopy-example", d.FieldCopyExample, "field-copy example applied after --example (Courier runs with --fieldcopy-target=configmaps limited to the workspace); empty: none")
	fs.StringVar(&c.courier, "courier-binary", d.CourierBinary, "where up builds Courier and serve runs it from")
	fs.StringVar(&c.agent, "agent-binary", d.AgentBinary, "where up builds courier-agent and serve runs it from (for downstream-2)")
	fs.IntVar(&c.downstreams, "downstreams", d.Downstreams, "number of downstream clusters")
	fs.Var(&c.courierArgs, "courier-arg", "extra flag for Courier (repeatable)")
	_ = fs.Parse(args)

	root, err := localenv.RepoRoot()
	if err == nil {
		err = os.Chdir(root) // every default path is relative to the repository
	}
	if err != nil {
		fatal(err)
	}
	if c.dir, err = filepath.Abs(c.dir); err != nil {
		fatal(err)
	}
	switch cmd {
	case "up":
		err = up(c, root)
	case "down":
		err = down(c.dir, true)
	case "serve":
		err = serve(c)
	default:
		usage()
	}
	if err != nil {
		fatal(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localup up|down [flags]   (localup up -h for flags)")
	os.Exit(2)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "localup:", err)
	os.Exit(1)
}

// up prepares binaries, starts the supervisor and waits until it reports
// ready, then prints what is running and how to use it.
func up(c config, root string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	began := time.Now()

	if err := down(c.dir, false); err != nil { // a previous `up` without `down`
		return err
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "logs"), 0o755); err != nil {
		return err
	}
	if c.binDir == "" {
		fmt.Println("localup: hack/build-tools.sh (the first build takes 15-20 minutes)")
		tools := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-tools.sh"))
		tools.Stderr = os.Stderr
		out, err := tools.Output()
		if err != nil {
			return fmt.Errorf("hack/build-tools.sh: %w", err)
		}
		lines := strings.Fields(string(out))
		if len(lines) == 0 {
			return errors.New("hack/build-tools.sh printed no directory")
		}
		c.binDir = lines[len(lines)-1]
	}
	fmt.Println("localup: building Courier into", c.courier)
	if err := localenv.BuildCourier(ctx, root, c.courier); err != nil {
		return err
	}
	fmt.Println("localup: building courier-agent into", c.agent)
	if err := localenv.BuildAgent(ctx, root, c.agent); err != nil {
		return err
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(c.dir, "logs", "localup.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	args := []string{"serve", "--dir", c.dir, "--bin-dir", c.binDir, "--crds", c.crds, "--admission", c.admission, "--example", c.example,
		"--fieldcopy-example", c.fcExample, "--courier-binary", c.courier, "--agent-binary", c.agent, "--downstreams", strconv.Itoa(c.downstreams)}
	for _, a := range c.courierArgs {
		args = append(args, "--courier-arg", a)
	}
	sup := exec.Command(self, args...)
	sup.Stdout, sup.Stderr = logFile, logFile
	// A new session: no controlling terminal, so neither Ctrl-C nor the end
	// of `make` reaches the supervisor; only `down` does.
	sup.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sup.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, pidFile), []byte(strconv.Itoa(sup.Process.Pid)+"\n"), 0o644); err != nil {
		_ = sup.Process.Kill()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- sup.Wait() }()

	fmt.Printf("localup: starting clusters and Courier (supervisor pid %d, log %s)\n", sup.Process.Pid, rel(logPath))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(upTimeout)
	for ready := false; !ready; {
		select {
		case err := <-exited:
			return fmt.Errorf("supervisor exited (%v); last lines of %s:\n%s", err, rel(logPath), localenv.Tail(logPath, 30))
		case <-ctx.Done():
			_ = down(c.dir, false)
			return errors.New("interrupted; stopped everything")
		case <-deadline:
			_ = down(c.dir, false)
			return fmt.Errorf("not ready after %s; last lines of %s:\n%s", upTimeout, rel(logPath), localenv.Tail(logPath, 30))
		case <-tick.C:
			_, err := os.Stat(filepath.Join(c.dir, readyFile))
			ready = err == nil
		}
	}

	kubeconfig := filepath.Join(c.dir, "upstream.kubeconfig")
	fmt.Printf("localup: ready in %s\n\n$ kubectl get downstreamcopies -A\n", time.Since(began).Round(time.Second))
	kubectl := filepath.Join(c.binDir, "kubectl")
	fmt.Println(settled(ctx, kubectl, kubeconfig, "downstreamcopies"))
	if c.fcExample != "" {
		fmt.Printf("\n$ kubectl get fieldcopies -A\n%s\n", settled(ctx, kubectl, kubeconfig, "fieldcopies"))
	}
	fmt.Printf(`Upstream and downstream clusters, Courier and downstream-2's courier-agent
are running in the background (downstream-1 is pushed, downstream-2 pulled).

  export KUBECONFIG=%s
  kubectl get downstreamcopies -n %s     # or: kubectl get courier -A
  kubectl --kubeconfig %s get secrets,configmaps -n example
  PATH=$PWD/_output/bin:$PATH kubectl courier status -A   # the plugin (make build built it)

kubectl is in %s. Logs: %s/logs/.
Stop everything with: make down
`, rel(kubeconfig), workspace, rel(filepath.Join(c.dir, "downstream-1.kubeconfig")), c.binDir, rel(c.dir))
	return nil
}

// settled lists a Courier resource in every namespace through the
// aggregator, waiting up to 15 s until the listing has rows and none is
// Pending, so the first look shows the outcome rather than the start-up.
func settled(ctx context.Context, kubectl, kubeconfig, resource string) string {
	var out string
	for range 15 {
		b, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "get", resource, "-A").CombinedOutput()
		out = strings.TrimRight(string(b), "\n")
		if err == nil && !strings.Contains(out, "Pending") && strings.Contains(out, "\n") {
			break
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(time.Second):
		}
	}
	return out
}

// down stops the supervisor named in the pid file (SIGTERM; it stops its
// children) and then kills any recorded child still alive, for the case the
// supervisor was killed without cleaning up. verbose says what it did.
func down(dir string, verbose bool) error {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if errors.Is(err, os.ErrNotExist) {
		if n := localenv.KillRecorded(dir); n > 0 && verbose {
			fmt.Printf("localup: killed %d leftover processes\n", n)
		} else if verbose {
			fmt.Println("localup: nothing is running")
		}
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile, err)
	}
	if isSupervisor(pid) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(30 * time.Second)
		for isSupervisor(pid) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if isSupervisor(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	n := localenv.KillRecorded(dir)
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if verbose {
		fmt.Printf("localup: stopped (supervisor pid %d", pid)
		if n > 0 {
			fmt.Printf(", %d leftover processes killed", n)
		}
		fmt.Printf("); logs kept in %s/logs\n", rel(dir))
	}
	return nil
}

// isSupervisor reports whether pid is alive and is a `localup serve`, so a
// stale pid file never makes down signal an unrelated process.
func isSupervisor(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	if len(args) < 2 || args[1] != "serve" {
		return false
	}
	// A zombie (exited, not yet reaped) keeps its cmdline readable on some
	// kernels but has nothing left to stop.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// serve is the supervisor: it owns every process, sets up the clusters
// (package localup, which tests bring up the same way) and stays until
// SIGTERM (from down), then stops them all.
func serve(c config) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logf := func(format string, args ...any) {
		fmt.Printf(time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
	}
	defer func() {
		// Whether it stopped on request or failed, nothing runs any more.
		_ = os.Remove(filepath.Join(c.dir, pidFile))
		_ = os.Remove(filepath.Join(c.dir, readyFile))
	}()
	s, err := localup.Up(ctx, localup.Config{Dir: c.dir, BinDir: c.binDir, CRDs: c.crds, Admission: c.admission,
		Example: c.example, FieldCopyExample: c.fcExample, CourierBinary: c.courier, AgentBinary: c.agent,
		Downstreams: c.downstreams, CourierArgs: c.courierArgs, Log: logf})
	if err != nil {
		return err
	}
	defer s.Stop()
	if err := os.WriteFile(filepath.Join(c.dir, readyFile), []byte(time.Now().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	logf("localup: ready; waiting for SIGTERM (make down)")
	<-ctx.Done()
	logf("localup: stopping")
	s.Stop()
	logf("localup: stopped")
	return nil
}

func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
