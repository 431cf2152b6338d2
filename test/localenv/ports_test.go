package localenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests here need no tools: they run in every `go test`, also at the
// same time as suites in other processes that start real servers. So they
// take ports the way those do (the machine's range, the shared lock
// directory), never probe a port another allocator holds, and give back
// every port they take.

// testAllocator is an allocator as the package builds it, in the shared
// lock directory; everything it holds is released when the test ends.
func testAllocator(t *testing.T) *portAllocator {
	t.Helper()
	lo, hi, err := allocationRange(ephemeralRange())
	if err != nil {
		t.Fatal(err)
	}
	a, err := newPortAllocator(lo, hi, filepath.Join(os.TempDir(), "courier-ports"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for p := range a.heldPorts() {
			a.release(p)
		}
	})
	return a
}

// heldPorts is a copy of the set of ports a holds.
func (a *portAllocator) heldPorts() map[int]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := map[int]bool{}
	for p := range a.held {
		held[p] = true
	}
	return held
}

func mustReserve(t *testing.T, a *portAllocator) int {
	t.Helper()
	p, err := a.reserve()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseEphemeralRange(t *testing.T) {
	tests := []struct {
		in     string
		lo, hi int
	}{
		{"32768\t60999\n", 32768, 60999},
		{"1024 65535", 1024, 65535},
		{"49152 65535\n", 49152, 65535},
		{"", defaultEphemeralLo, defaultEphemeralHi},
		{"60999 32768", defaultEphemeralLo, defaultEphemeralHi},
		{"0 60999", defaultEphemeralLo, defaultEphemeralHi},
		{"32768 70000", defaultEphemeralLo, defaultEphemeralHi},
		{"a b", defaultEphemeralLo, defaultEphemeralHi},
		{"32768", defaultEphemeralLo, defaultEphemeralHi},
	}
	for _, tt := range tests {
		if lo, hi := parseEphemeralRange(tt.in); lo != tt.lo || hi != tt.hi {
			t.Errorf("parseEphemeralRange(%q) = %d-%d, want %d-%d", tt.in, lo, hi, tt.lo, tt.hi)
		}
	}
}

func TestAllocationRange(t *testing.T) {
	tests := []struct {
		name         string
		ephLo, ephHi int
		lo, hi       int // 0, 0: an error
	}{
		{"Linux default", 32768, 60999, 20000, 32767},
		{"ephemeral range above", 49152, 65535, 20000, 32767},
		{"ephemeral range below", 1024, 4999, 20000, 32767},
		{"ephemeral range overlaps the top", 25000, 60999, 20000, 24999},
		{"ephemeral range overlaps the bottom", 10000, 22000, 22001, 32767},
		{"ephemeral range inside: larger part", 24000, 28000, 28001, 32767},
		{"ephemeral range covers it: above", 10000, 60999, 61000, 65535},
		{"ephemeral range covers it and most above: below", 15000, 65000, 1024, 14999},
		{"ephemeral range covers nearly everything", 1500, 65535, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi, err := allocationRange(tt.ephLo, tt.ephHi)
			if tt.lo == 0 {
				if err == nil {
					t.Fatalf("got %d-%d, want an error", lo, hi)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lo != tt.lo || hi != tt.hi {
				t.Errorf("got %d-%d, want %d-%d", lo, hi, tt.lo, tt.hi)
			}
			if lo <= tt.ephHi && tt.ephLo <= hi {
				t.Errorf("%d-%d overlaps the ephemeral range %d-%d", lo, hi, tt.ephLo, tt.ephHi)
			}
		})
	}
}

// TestPortAllocatorOutsideEphemeralRange reserves many ports at once:
// none is in this machine's ephemeral range and none comes twice.
func TestPortAllocatorOutsideEphemeralRange(t *testing.T) {
	ephLo, ephHi := ephemeralRange()
	a := testAllocator(t)
	t.Logf("ephemeral range %d-%d, allocating from %d-%d", ephLo, ephHi, a.lo, a.hi)
	seen := map[int]bool{}
	for range 300 {
		p := mustReserve(t, a)
		if p >= ephLo && p <= ephHi {
			t.Fatalf("port %d is in the ephemeral range %d-%d", p, ephLo, ephHi)
		}
		if p < a.lo || p > a.hi {
			t.Fatalf("port %d is outside %d-%d", p, a.lo, a.hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	// The package's own allocator uses the same range.
	d, err := defaultPorts()
	if err != nil {
		t.Fatal(err)
	}
	if d.lo != a.lo || d.hi != a.hi {
		t.Errorf("defaultPorts range %d-%d, want %d-%d", d.lo, d.hi, a.lo, a.hi)
	}
}

// TestPortAllocatorReleaseAndReuse: a released port can be reserved again,
// by this allocator or another.
func TestPortAllocatorReleaseAndReuse(t *testing.T) {
	a, b := testAllocator(t), testAllocator(t)
	p := mustReserve(t, a)
	b.next = p
	if q := mustReserve(t, b); q == p {
		t.Fatalf("port %d held by one allocator was handed out by another", p)
	}
	a.release(p)
	a.release(p) // no-op
	b.next = p
	if q := mustReserve(t, b); q != p {
		// Only another process taking p in between explains this.
		t.Logf("released port %d not reserved again (got %d): taken meanwhile?", p, q)
	}
}

// TestPortAllocatorsShareNothing plays two test processes whose random
// starts are the same: while both hold their ports, none is in both.
func TestPortAllocatorsShareNothing(t *testing.T) {
	a, b := testAllocator(t), testAllocator(t)
	b.next = a.next
	fromA := map[int]bool{}
	for range 100 {
		fromA[mustReserve(t, a)] = true
		if p := mustReserve(t, b); fromA[p] {
			t.Fatalf("port %d handed out by both allocators", p)
		}
	}
	for p := range b.heldPorts() {
		if fromA[p] {
			t.Fatalf("port %d handed out by both allocators", p)
		}
	}
}

// TestPortAllocatorAcrossProcesses does the same with a real second
// process, and checks its reservations end when it exits.
func TestPortAllocatorAcrossProcesses(t *testing.T) {
	a := testAllocator(t)
	start := a.next
	cmd := exec.Command(os.Args[0], "-test.run=^TestPortHolderProcess$")
	cmd.Env = append(os.Environ(), "LOCALENV_PORT_HOLDER="+strconv.Itoa(start))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var theirs []int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "holding "); ok {
			for _, f := range strings.Fields(rest) {
				p, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("helper printed %q", sc.Text())
				}
				theirs = append(theirs, p)
			}
			break
		}
	}
	if len(theirs) == 0 {
		t.Fatal("helper process printed no ports")
	}
	held := map[int]bool{}
	for _, p := range theirs {
		held[p] = true
	}
	for range len(theirs) {
		if p := mustReserve(t, a); held[p] {
			t.Fatalf("port %d handed out while another process holds it", p)
		}
	}
	stdin.Close() // the helper exits without releasing anything itself
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper process: %v", err)
	}
	// The kernel dropped its locks. Any of them could have been taken by
	// a third process since; not most of them.
	free := 0
	for _, p := range theirs {
		if f, err := a.lock(p); err == nil && f != nil {
			f.Close()
			free++
		}
	}
	if free < len(theirs)/2 {
		t.Errorf("only %d of %d ports free again after the holding process exited", free, len(theirs))
	}
}

// TestPortHolderProcess is the second process of
// TestPortAllocatorAcrossProcesses: it reserves 20 ports from the start
// given, prints them and holds them until stdin closes.
func TestPortHolderProcess(t *testing.T) {
	start, err := strconv.Atoi(os.Getenv("LOCALENV_PORT_HOLDER"))
	if err != nil {
		t.Skip("helper process for TestPortAllocatorAcrossProcesses")
	}
	a := testAllocator(t)
	a.next = start
	var ports []string
	for range 20 {
		ports = append(ports, strconv.Itoa(mustReserve(t, a)))
	}
	fmt.Printf("holding %s\n", strings.Join(ports, " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0) // no cleanup: the locks must go with the process
}

// TestPortAllocatorSkipsBoundPort: a port something listens on is not
// handed out, whether the listener has 127.0.0.1 or the wildcard address.
func TestPortAllocatorSkipsBoundPort(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "0.0.0.0"} {
		t.Run(host, func(t *testing.T) {
			a, b := testAllocator(t), testAllocator(t)
			p := mustReserve(t, a)
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			a.release(p) // no lock on it any more, only the listener
			b.next = p
			if q := mustReserve(t, b); q == p {
				t.Fatalf("port %d handed out while %s listens on it", p, ln.Addr())
			}
		})
	}
}

func TestBindConflict(t *testing.T) {
	dir := t.TempDir()
	p := &process{name: "x", logPath: filepath.Join(dir, "x.log")}
	old := "E0101 listen tcp 127.0.0.1:21000: bind: address already in use\n"
	lines := []string{
		// kube-apiserver (and Courier, the same generic API server)
		`E0519 12:00:00.000000 1 run.go:72] "command failed" err="failed to create listener: failed to listen on 127.0.0.1:21001: listen tcp 127.0.0.1:21001: bind: address already in use"`,
		// etcd
		`{"level":"fatal","msg":"discovery failed","error":"listen tcp 127.0.0.1:21002: bind: address already in use"}`,
		// Another port than the ones asked about.
		`listen tcp 127.0.0.1:121003: bind: address already in use`,
	}
	if err := os.WriteFile(p.logPath, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	p.logStart = int64(len(old))
	if err := os.WriteFile(p.logPath, []byte(old+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ports []int
		want  int
	}{
		{[]int{21000}, 0}, // logged by an earlier run
		{[]int{21001}, 21001},
		{[]int{20999, 21002}, 21002},
		{[]int{21003}, 0},
		{[]int{1003}, 0},
	}
	for _, tt := range tests {
		if got := p.bindConflict(tt.ports); got != tt.want {
			t.Errorf("bindConflict(%v) = %d, want %d", tt.ports, got, tt.want)
		}
	}
}

// fakeEnv is an Env with no clusters, for starting fake servers.
func fakeEnv(t *testing.T) *Env {
	t.Helper()
	e := &Env{opts: Options{Dir: t.TempDir(), Log: t.Logf}}
	t.Cleanup(e.Stop)
	return e
}

// fakeServer is this test binary run as TestFakeServerProcess: an HTTP
// server on the port given that exits as a real server does when the port
// is taken. Stop stops it.
func fakeServer(e *Env, pids *[]int) *process {
	p := &process{
		name:    "fake",
		path:    os.Args[0],
		logPath: filepath.Join(e.opts.Dir, "fake.log"),
		onStart: func(pid int, _ string) { *pids = append(*pids, pid) },
		grace:   time.Second,
	}
	e.procs = append(e.procs, p)
	return p
}

func waitHTTP(ctx context.Context, p *process, port int) error {
	hc := &http.Client{Timeout: time.Second}
	return poll(ctx, 30*time.Second, p, func() (bool, error) {
		resp, err := hc.Get("http://127.0.0.1:" + strconv.Itoa(port))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// TestStartOnFreePortsRetriesTakenPort: when something binds the port
// between the check and the server's bind, the server is started again on
// a new port, the first process is reaped and its port released.
func TestStartOnFreePortsRetriesTakenPort(t *testing.T) {
	t.Setenv("LOCALENV_FAKE_SERVER", "serve")
	ctx := context.Background()
	e := fakeEnv(t)
	var pids, tried []int
	p := fakeServer(e, &pids)
	configure := func(ports []int) error {
		tried = append(tried, ports[0])
		if len(tried) == 1 {
			// Something outside localenv takes the port just now.
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[0]))
			if err != nil {
				return err
			}
			t.Cleanup(func() { ln.Close() })
		}
		p.setArgs([]string{"-test.run=^TestFakeServerProcess$", strconv.Itoa(ports[0])})
		return nil
	}
	wait := func() error { return waitHTTP(ctx, p, tried[len(tried)-1]) }
	ports, err := e.startOnFreePorts(p, 1, configure, wait)
	if err != nil {
		t.Fatal(err)
	}
	if len(tried) != 2 || ports[0] != tried[1] || tried[0] == tried[1] {
		t.Fatalf("tried ports %v, serving on %v; want a second, different port", tried, ports)
	}
	if len(pids) != 2 {
		t.Fatalf("started %d processes, want 2", len(pids))
	}
	if err := syscall.Kill(pids[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("first process %d not reaped: kill 0 = %v", pids[0], err)
	}
	if held := e.ports; len(held) != 1 || held[0] != tried[1] {
		t.Errorf("Env holds ports %v, want only %d", held, tried[1])
	}
	a, _ := defaultPorts()
	if a.heldPorts()[tried[0]] {
		t.Errorf("taken port %d still reserved", tried[0])
	}
	log, _ := os.ReadFile(p.logPath)
	if n := strings.Count(string(log), "=== localenv:"); n != 2 {
		t.Errorf("log has %d runs, want 2:\n%s", n, log)
	}
	e.Stop()
	if done, _ := p.exited(); !done {
		t.Error("server still running after Stop")
	}
	if held := a.heldPorts(); held[tried[1]] {
		t.Errorf("port %d still reserved after Stop", tried[1])
	}
}

// TestStartOnFreePortsOtherFailure: a server that fails for another reason
// is not started again.
func TestStartOnFreePortsOtherFailure(t *testing.T) {
	t.Setenv("LOCALENV_FAKE_SERVER", "fail")
	e := fakeEnv(t)
	var pids []int
	p := fakeServer(e, &pids)
	var port int
	configure := func(ports []int) error {
		port = ports[0]
		p.setArgs([]string{"-test.run=^TestFakeServerProcess$", strconv.Itoa(port)})
		return nil
	}
	wait := func() error { return waitHTTP(context.Background(), p, port) }
	if _, err := e.startOnFreePorts(p, 1, configure, wait); err == nil {
		t.Fatal("no error from a server that exits")
	}
	if len(pids) != 1 {
		t.Errorf("started %d times, want once", len(pids))
	}
}

// TestFakeServerProcess is the server of the startOnFreePorts tests.
func TestFakeServerProcess(t *testing.T) {
	mode := os.Getenv("LOCALENV_FAKE_SERVER")
	if mode == "" {
		t.Skip("helper process for the startOnFreePorts tests")
	}
	args := strings.Fields(strings.Join(os.Args[1:], " "))
	port := args[len(args)-1]
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "fake: cannot start: no reason")
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake: failed to create listener:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "fake: serving on", ln.Addr())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	os.Exit(1)
}
