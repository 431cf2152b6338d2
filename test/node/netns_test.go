package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// nodeIP is the node's address: on an interface inside the node's
// network namespace only, in 198.18.0.0/15 (RFC 2544 benchmarking), which
// cannot collide with the machine's own addresses. Nothing routes it
// anywhere else.
const (
	nodeIP   = "198.18.0.2"
	nodeCIDR = nodeIP + "/24"
)

// nodeNetns is a network namespace the suite makes with `ip netns add`:
// loopback, and an interface holding nodeIP with the default route
// (so that the kubelet finds a node address), nothing connected to the
// machine's own network.
type nodeNetns struct {
	name string
	path string // /run/netns/<name>
}

func newNodeNetns(ctx context.Context, name string) (*nodeNetns, error) {
	n := &nodeNetns{name: name, path: "/run/netns/" + name}
	if err := ip(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// A veth pair with both ends inside: the kernel here has no dummy
		// interfaces, and nothing is connected to the machine.
		{"link", "add", "node0", "type", "veth", "peer", "name", "node0-end"},
		{"addr", "add", nodeCIDR, "dev", "node0"},
		{"link", "set", "node0-end", "up"},
		{"link", "set", "node0", "up"},
		{"route", "add", "default", "dev", "node0"},
	} {
		if err := ip(ctx, append([]string{"-n", name}, args...)...); err != nil {
			return n, err
		}
	}
	return n, nil
}

// remove deletes the namespace (its interfaces go with it).
func (n *nodeNetns) remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return ip(ctx, "netns", "del", n.name)
}

func ip(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// listen opens a TCP listener on addr inside the namespace: a socket
// stays in the namespace it was made in, so the suite (in the machine's
// namespace) can accept connections that processes in the node make to
// their own loopback.
func (n *nodeNetns) listen(addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread switches namespace and back; if switching back fails
		// it is never unlocked, so it ends with this goroutine.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open(n.path)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering %s: %w", n.path, err)}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := setns(orig); err != nil {
			if l != nil {
				l.Close()
			}
			ch <- result{err: fmt.Errorf("leaving %s: %w", n.path, err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{l, lerr}
	}()
	r := <-ch
	return r.l, r.err
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// forwarder accepts connections on a listener inside the node's namespace
// and connects each to target in the machine's (a kube-apiserver on
// 127.0.0.1): the node reaches it on its own loopback, nothing listens
// beyond loopback anywhere.
type forwarder struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func forward(l net.Listener, target string) *forwarder {
	f := &forwarder{l: l, target: target, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	return f
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.pipe(c)
		}()
	}
}

func (f *forwarder) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", f.target, 10*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !f.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(up, c)
	go copyHalf(c, up)
	<-done
	<-done
	f.untrack(c, up)
}

func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = true
	}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(f.conns, c)
	}
}

// close stops accepting, closes every connection and waits.
func (f *forwarder) close() error {
	err := f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
