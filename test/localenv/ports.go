package localenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports for the servers localenv starts come from a portAllocator, not
// from listening on :0 and closing the listener.
//
// Why not :0: the kernel answers a bind to port 0 from the ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default), the same range it
// takes the local port of every outgoing connection from. Three
// kube-apiservers, a kube-controller-manager per cluster and Courier open
// many connections, so between closing the probe listener and the server's
// own bind the port can become the local end of one of them, and the
// server fails with "address already in use".
//
// Design:
//
//   - Range. Ports come from a range disjoint from the ephemeral range read
//     from /proc/sys/net/ipv4/ip_local_port_range (32768-60999 when it
//     cannot be read): 20000-32767 normally, see allocationRange for other
//     ephemeral ranges. The kernel never picks such a port for an outgoing
//     connection, so only a process that binds it explicitly can take it.
//   - Within a process. An allocator remembers what it handed out and walks
//     the range from a random start, so two allocators (two test processes)
//     rarely even look at the same ports.
//   - Across processes. `go test ./test/...` runs test/e2e, test/bench and
//     test/localenv as parallel processes, each starting clusters. A port is
//     handed out only while the process holds an exclusive flock on
//     <os.TempDir()>/courier-ports/<port>.lock; the lock is taken before the
//     port is checked, so no other allocator can check and hand out the same
//     port in between. The lock lives as long as the open file: it is given
//     up by release (Env.Stop releases the Env's ports) or by the kernel
//     when the process exits, however it exits, so a killed test never
//     leaves a port reserved. Lock files are never removed: removing one
//     while another process has it open would let two processes lock
//     different files for the same port.
//   - Free now. With the lock held, the port is handed out only if
//     127.0.0.1:<port> can be bound (the bind also fails when something
//     listens on the wildcard address).
//
// What remains is a process outside localenv binding a port of the range
// between the check and the server's bind. startOnFreePorts covers that:
// a server that exits because its port is taken starts again on new ones.
type portAllocator struct {
	lo, hi  int    // inclusive
	lockDir string // one <port>.lock file per port

	mu   sync.Mutex
	next int              // where the next search starts
	held map[int]*os.File // handed out, with its locked file
}

const (
	// defaultEphemeralLo and defaultEphemeralHi are Linux's default
	// ip_local_port_range, assumed when it cannot be read.
	defaultEphemeralLo = 32768
	defaultEphemeralHi = 60999
	// preferredLo and preferredHi are the range ports come from when it
	// does not overlap the ephemeral range: below the default ephemeral
	// range and above the ports services commonly listen on.
	preferredLo = 20000
	preferredHi = 32767
	// minRangeSize is the fewest ports a usable range has: an Env needs
	// about ten, and several run at once.
	minRangeSize = 1000
)

// ephemeralRange returns the kernel's ephemeral port range, or the Linux
// default when it cannot be read or makes no sense.
func ephemeralRange() (lo, hi int) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLo, defaultEphemeralHi
	}
	return parseEphemeralRange(string(data))
}

// parseEphemeralRange parses the contents of ip_local_port_range ("32768
// 60999"), falling back to the Linux default.
func parseEphemeralRange(s string) (lo, hi int) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return defaultEphemeralLo, defaultEphemeralHi
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return defaultEphemeralLo, defaultEphemeralHi
	}
	return lo, hi
}

// allocationRange picks the range to allocate from given the ephemeral
// range [ephLo, ephHi]: the largest part of 20000-32767 outside it, else
// the ports above it, else the unprivileged ports below it, whichever first
// has at least minRangeSize ports.
func allocationRange(ephLo, ephHi int) (lo, hi int, err error) {
	type span struct{ lo, hi int }
	size := func(s span) int { return s.hi - s.lo + 1 }
	outside := func(s span) span { // the larger part of s outside the ephemeral range
		below := span{s.lo, min(s.hi, ephLo-1)}
		above := span{max(s.lo, ephHi+1), s.hi}
		if size(above) > size(below) {
			return above
		}
		return below
	}
	for _, s := range []span{{preferredLo, preferredHi}, {ephHi + 1, 65535}, {1024, ephLo - 1}} {
		if s = outside(s); size(s) >= minRangeSize {
			return s.lo, s.hi, nil
		}
	}
	return 0, 0, fmt.Errorf("localenv: the ephemeral port range %d-%d leaves no %d unprivileged ports outside it to run servers on", ephLo, ephHi, minRangeSize)
}

// newPortAllocator allocates from [lo, hi], reserving ports with lock
// files in lockDir.
func newPortAllocator(lo, hi int, lockDir string) (*portAllocator, error) {
	if lo < 1 || hi > 65535 || lo > hi {
		return nil, fmt.Errorf("localenv: bad port range %d-%d", lo, hi)
	}
	if err := os.MkdirAll(lockDir, 0o777); err != nil {
		return nil, fmt.Errorf("localenv: port lock directory: %w", err)
	}
	// Shared by every user's tests, like /tmp: anyone may add lock files.
	// Only the owner can change the mode, and only needs to once.
	if st, err := os.Stat(lockDir); err == nil && st.Mode()&os.ModeSticky == 0 {
		_ = os.Chmod(lockDir, 0o777|os.ModeSticky)
	}
	return &portAllocator{
		lo:      lo,
		hi:      hi,
		lockDir: lockDir,
		next:    lo + rand.IntN(hi-lo+1),
		held:    map[int]*os.File{},
	}, nil
}

// defaultPorts is the allocator the package uses: the range is computed
// from this machine's ephemeral range and the locks are shared by every
// process on it.
var defaultPorts = sync.OnceValues(func() (*portAllocator, error) {
	ephLo, ephHi := ephemeralRange()
	lo, hi, err := allocationRange(ephLo, ephHi)
	if err != nil {
		return nil, err
	}
	return newPortAllocator(lo, hi, filepath.Join(os.TempDir(), "courier-ports"))
})

// reserve returns a port that no other allocator holds and that 127.0.0.1
// can bind now. It stays reserved until release or the process exits.
func (a *portAllocator) reserve() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.hi - a.lo + 1
	for range n {
		port := a.next
		a.next++
		if a.next > a.hi {
			a.next = a.lo
		}
		if _, ok := a.held[port]; ok {
			continue
		}
		f, err := a.lock(port)
		if err != nil {
			return 0, err
		}
		if f == nil {
			continue // another allocator holds it
		}
		if !canBind(port) {
			f.Close()
			continue
		}
		a.held[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("localenv: no free port in %d-%d (%d held by this process)", a.lo, a.hi, len(a.held))
}

// lock takes the port's lock file, returning nil (and no error) when
// another allocator holds it. Read-only is enough for flock, and lets a
// user lock a file another user created.
func (a *portAllocator) lock(port int) (*os.File, error) {
	path := filepath.Join(a.lockDir, strconv.Itoa(port)+".lock")
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localenv: port lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, nil
	default:
		f.Close()
		return nil, fmt.Errorf("localenv: port lock %s: %w", path, err)
	}
}

// release gives a reserved port back. Releasing a port not held is a no-op.
func (a *portAllocator) release(port int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f, ok := a.held[port]; ok {
		f.Close() // drops the flock
		delete(a.held, port)
	}
}

// canBind reports whether a TCP listener can bind 127.0.0.1:port now.
// Closing a listener that accepted nothing leaves no TIME_WAIT behind, so
// the server can bind the port right after.
func canBind(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// reservePorts reserves n ports for this Env; Stop releases them.
func (e *Env) reservePorts(n int) ([]int, error) {
	a, err := defaultPorts()
	if err != nil {
		return nil, err
	}
	ports := make([]int, 0, n)
	for range n {
		p, err := a.reserve()
		if err != nil {
			for _, p := range ports {
				a.release(p)
			}
			return nil, err
		}
		ports = append(ports, p)
	}
	e.mu.Lock()
	e.ports = append(e.ports, ports...)
	e.mu.Unlock()
	return ports, nil
}

// releasePorts gives ports reserved by reservePorts back.
func (e *Env) releasePorts(ports ...int) {
	a, err := defaultPorts()
	if err != nil {
		return // then nothing was reserved
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range ports {
		for i, q := range e.ports {
			if q == p {
				e.ports = append(e.ports[:i], e.ports[i+1:]...)
				a.release(p)
				break
			}
		}
	}
}

// maxPortAttempts bounds how often a server is started on new ports after
// finding one taken.
const maxPortAttempts = 5

// startOnFreePorts starts p on n newly reserved ports. configure sets p's
// arguments and everything else that names the ports (URLs, kubeconfigs);
// it runs before every attempt, with that attempt's ports. wait returns
// once p serves. When p exits during wait because one of its ports was
// taken by the time it bound it (its log says "address already in use" for
// that port), the ports are released and p is configured and started again
// on new ones. Certificates name hosts and IPs, never ports, so they stay
// valid. It returns the ports p serves on.
func (e *Env) startOnFreePorts(p *process, n int, configure func(ports []int) error, wait func() error) ([]int, error) {
	for attempt := 1; ; attempt++ {
		if e.isStopped() {
			return nil, errors.New("localenv: the Env has been stopped")
		}
		ports, err := e.reservePorts(n)
		if err != nil {
			return nil, err
		}
		if err := configure(ports); err != nil {
			return nil, err
		}
		if err := p.start(); err != nil {
			return nil, err
		}
		err = wait()
		if err == nil {
			return ports, nil
		}
		exited, _ := p.exited() // true only once the process has been reaped
		if !exited || attempt == maxPortAttempts {
			return nil, err
		}
		taken := p.bindConflict(ports)
		if taken == 0 {
			return nil, err
		}
		e.opts.Log("localenv: %s: port %d was taken before it could bind it (attempt %d of %d); starting it on new ports", p.name, taken, attempt, maxPortAttempts)
		e.releasePorts(ports...)
	}
}

// bindConflict returns which of ports the last run of p failed to bind
// because it was in use, from the log written since that run started, or
// 0 when the log shows no such failure.
func (p *process) bindConflict(ports []int) int {
	f, err := os.Open(p.logPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	p.mu.Lock()
	from := p.logStart
	p.mu.Unlock()
	// A bind fails early; the last 256 KiB of the run hold it.
	const max = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size()-from > max {
		from = st.Size() - max
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return 0
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "address already in use") {
			continue
		}
		for _, port := range ports {
			if strings.Contains(line, "127.0.0.1:"+strconv.Itoa(port)+":") ||
				strings.Contains(line, ":"+strconv.Itoa(port)+": bind") {
				return port
			}
		}
	}
	return 0
}
