package localenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a process gets after SIGTERM before SIGKILL. etcd
// and kube-apiserver shut down cleanly well within it; a test that stops a
// cluster on purpose does not want to wait for a long graceful drain.
const stopGrace = 5 * time.Second

// tailLines is how much of a log a start failure quotes.
const tailLines = 30

// process is one child binary with its own log file and process group.
// It can be started again after it stopped (same arguments, same log,
// appended), which is how a cluster comes back on the same port.
type process struct {
	name    string // e.g. "kube-apiserver-upstream", also the log file's base name
	path    string
	args    []string
	logPath string
	onStart func(pid int, path string) // records the pid for `localup down`
	grace   time.Duration              // between SIGTERM and SIGKILL; default stopGrace

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has been reaped
	waitErr  error
	logStart int64 // size of the log when the last run started
}

// start runs the binary in a new process group (so stop can kill anything it
// forks too) with the parent-death signal set to SIGKILL (so a test binary
// killed by `go test -timeout` or a crash does not leave servers behind).
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running (pid %d)", p.name, p.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil {
		p.logStart = st.Size()
	}
	fmt.Fprintf(f, "=== localenv: %s %s\n", p.path, strings.Join(p.args, " "))
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.waitErr = cmd, done, nil
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	if p.onStart != nil {
		p.onStart(cmd.Process.Pid, p.path)
	}
	return nil
}

// setArgs replaces the arguments the next start uses.
func (p *process) setArgs(args []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.args = args
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true, errors.New("never started")
	}
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.waitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace,
// and returns once the process has been reaped. Safe to call repeatedly and
// on a process that never started.
func (p *process) stop() (exitedOnItsOwn bool) {
	cmd, done, ok := p.running()
	if !ok {
		return true
	}
	pgid := cmd.Process.Pid // Setpgid: the group id is the leader's pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := p.grace
	if grace == 0 {
		grace = stopGrace
	}
	select {
	case <-done:
		return true
	case <-time.After(grace):
		// The leader has not been reaped, so the group id cannot have been
		// reused by an unrelated process.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return false
	}
}

// kill sends SIGKILL to the process group and returns once the process
// has been reaped.
func (p *process) kill() {
	cmd, done, ok := p.running()
	if !ok {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// running returns the process and its reaped channel, and false when it
// never started or has already exited.
func (p *process) running() (*exec.Cmd, chan struct{}, bool) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if done == nil {
		return nil, nil, false
	}
	select {
	case <-done:
		return nil, nil, false
	default:
		return cmd, done, true
	}
}

// failure wraps err with the tail of the process's log, which is where the
// reason for a failed start almost always is.
func (p *process) failure(err error) error {
	return fmt.Errorf("%s: %w\n--- last %d lines of %s ---\n%s", p.name, err, tailLines, p.logPath, Tail(p.logPath, tailLines))
}

// Tail returns the last n lines of the file at path (reading at most the
// last 256 KiB: kube-apiserver logs grow large), for error messages.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	const max = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// signal sends sig to the process group (SIGSTOP pauses it, SIGCONT
// resumes it).
func (p *process) signal(sig syscall.Signal) error {
	cmd, _, ok := p.running()
	if !ok {
		return fmt.Errorf("%s is not running", p.name)
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}
