package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/test/localenv"
)

// profileDir is COURIER_BENCH_PROFILE: when set, the benchmark saves
// Courier's pprof profiles there (CPU profiles over a new HelmOp and the
// first round of a change of every source and of one source at each N, a
// heap profile while it holds the copies), read from Courier's /debug/pprof as the upstream admin. Unset,
// nothing is fetched and the figures are not disturbed by profiling.
func profileDir() string { return os.Getenv("COURIER_BENCH_PROFILE") }

// profileEveryRound is COURIER_BENCH_PROFILE_ROUNDS=all: profile every
// round's Courier windows, not only the first (cpu-<N>-<kind>-r<round>.pprof),
// so that short windows add up to enough samples to read
// (go tool pprof merges several files given together).
func profileEveryRound() bool { return os.Getenv("COURIER_BENCH_PROFILE_ROUNDS") == "all" }

// profileSeconds is COURIER_BENCH_PROFILE_SECONDS, default 30: the length
// of the CPU profile.
func profileSeconds(t *testing.T) time.Duration {
	return time.Duration(intsFromEnv(t, "COURIER_BENCH_PROFILE_SECONDS", []int{30})[0]) * time.Second
}

// traceToo is COURIER_BENCH_TRACE=1: with COURIER_BENCH_PROFILE, save an
// execution trace of each profiled window beside its CPU profile
// (<name>.trace; go tool trace reads it). Where the CPU profile shows what
// Courier computes, the trace shows where its workers wait: a pass that
// takes longer than its requests while the process is mostly idle.
func traceToo() bool { return os.Getenv("COURIER_BENCH_TRACE") == "1" }

// startCPUProfile starts fetching a CPU profile of d in the background
// (and a trace, with COURIER_BENCH_TRACE); the returned function waits for
// them and writes them to name (and name's .trace).
func startCPUProfile(t *testing.T, name string, d time.Duration) func() {
	dir := profileDir()
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	fetch := func(what, path, file string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := saveProfile(path, filepath.Join(dir, file), d+time.Minute); err != nil {
				t.Logf("%s %s: %v", what, file, err)
			}
		}()
	}
	seconds := int(d.Seconds())
	fetch("CPU profile", fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), name)
	// Where allocations came from (a delta profile). The runtime updates
	// that profile at garbage collections only, so a short window holds
	// the allocations of whole GC cycles, or none: it says where, not how
	// much (the window notes give how much).
	fetch("allocation profile", fmt.Sprintf("/debug/pprof/allocs?seconds=%d", seconds), strings.TrimSuffix(name, ".pprof")+".allocs.pprof")
	if traceToo() {
		fetch("trace", fmt.Sprintf("/debug/pprof/trace?seconds=%d", seconds), strings.TrimSuffix(name, ".pprof")+".trace")
	}
	serverProfile(t, &wg, name, d)
	return wg.Wait
}

// profileRound starts start's profiles of a round's window named name:
// the first of the first round, and every one with
// COURIER_BENCH_PROFILE_ROUNDS=all (rep numbers a kind's windows within a
// round).
func profileRound(t *testing.T, name string, round, rep int, start func(*testing.T, string, time.Duration) func()) func() {
	switch {
	case round == 1 && rep == 0:
		return start(t, name+".pprof", profileSeconds(t))
	case profileEveryRound():
		return start(t, fmt.Sprintf("%s-r%d-%d.pprof", name, round, rep), profileSeconds(t))
	}
	return func() {}
}

// startServerProfile is startCPUProfile for the pool's windows: only the
// kube-apiserver's profile (COURIER_BENCH_PROFILE_SERVERS), to compare with
// Courier's window of the same kind.
func startServerProfile(t *testing.T, name string, d time.Duration) func() {
	var wg sync.WaitGroup
	if profileDir() != "" {
		serverProfile(t, &wg, name, d)
	}
	return wg.Wait
}

// serverProfile fetches, with COURIER_BENCH_PROFILE_SERVERS=1, a CPU
// profile of d of downstream-1's and of the upstream's kube-apiserver in
// the background, into name with the server's name added
// (cpu-...-downstream-1.pprof, cpu-...-upstream.pprof).
func serverProfile(t *testing.T, wg *sync.WaitGroup, name string, d time.Duration) {
	if !profileServersToo() {
		return
	}
	for _, c := range []*localenv.Cluster{env.Downstreams[0], env.Upstream} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			file := strings.TrimSuffix(name, ".pprof") + "-" + c.Name + ".pprof"
			path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds()))
			if err := saveProfileFrom(c.Config, path, filepath.Join(profileDir(), file), d+time.Minute); err != nil {
				t.Logf("CPU profile %s: %v", file, err)
			}
		}()
	}
}

// profileServersToo is COURIER_BENCH_PROFILE_SERVERS=1: with
// COURIER_BENCH_PROFILE, also save a CPU profile of downstream-1's and the
// upstream's kube-apiservers over each profiled window
// (<name>-downstream-1.pprof, <name>-upstream.pprof), to see what
// Courier's requests and watches cost the servers it writes to.
func profileServersToo() bool { return os.Getenv("COURIER_BENCH_PROFILE_SERVERS") == "1" }

// startBenchProfile, with COURIER_BENCH_PROFILE, profiles this test
// process (the simulated agents, the clients, localenv's balancer) into
// name until the returned function is called: to tell a window's limit
// in the benchmark's own clients from one in the servers.
func startBenchProfile(t *testing.T, name string) func() {
	if profileDir() == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(profileDir(), name))
	if err != nil {
		t.Logf("bench profile %s: %v", name, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Logf("bench profile %s: %v", name, err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// saveHeapProfile writes Courier's heap profile to name.
func saveHeapProfile(t *testing.T, name string) {
	dir := profileDir()
	if dir == "" {
		return
	}
	if err := saveProfile("/debug/pprof/heap", filepath.Join(dir, name), time.Minute); err != nil {
		t.Logf("heap profile %s: %v", name, err)
	}
}

// saveHeapProfiles writes each replica's heap profile, to
// <prefix>-<replica>.pprof, and its goroutines with their stacks, to
// <prefix>-<replica>.goroutines.txt (what a watch's goroutine holds when
// idle): the Service spreads the agents' watches by connection, so the
// first replica may hold none of them.
func (s *replicaSet) saveHeapProfiles(t *testing.T, prefix string) {
	dir := profileDir()
	if dir == "" {
		return
	}
	for _, c := range s.rs {
		for path, suffix := range map[string]string{"/debug/pprof/heap": ".pprof", "/debug/pprof/goroutine?debug=1": ".goroutines.txt"} {
			file := filepath.Join(dir, fmt.Sprintf("%s-%s%s", prefix, c.Name(), suffix))
			if err := saveProfileFrom(c.Config, path, file, time.Minute); err != nil {
				t.Logf("profile %s: %v", file, err)
			}
		}
	}
}

func saveProfile(path, file string, timeout time.Duration) error {
	return saveProfileFrom(courier.Config, path, file, timeout)
}

// saveProfileFrom writes what path returns from the server of cfg to file.
func saveProfileFrom(cfg *rest.Config, path, file string, timeout time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	hc.Timeout = timeout
	body, err := getBody(context.Background(), hc, cfg.Host+path)
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}
