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
// network namespace, in 198.18.0.0/15 (RFC 2544 benchmarking), which
// cannot collide with the machine's own addresses. hostIP is the other end
// of the node's veth pair, in the machine's namespace: the only link
// between the two. podCIDR is the Pods' range, on the node's bridge; the
// machine routes it through the veth (the aggregator reaches Courier's
// Pod IPs: --enable-aggregator-routing), and nothing else.
const (
	nodeIP   = "198.18.0.2"
	nodeCIDR = nodeIP + "/24"
	hostIP   = "198.18.0.1"
	podCIDR  = "198.18.1.0/24"
	// downPodCIDR is the Pod range of the downstream cluster's kubelet.
	downPodCIDR = "198.18.2.0/24"
	// suiteRange is everything the node may send to over its veth.
	suiteRange = "198.18.0.0/15"
)

// nodeNetns is a network namespace the suite makes with `ip netns add`:
// loopback, and one end (node0, holding nodeIP, the default route) of a
// veth pair whose other end is in the machine's namespace with hostIP.
// The namespace forwards (node0 <-> the Pods' bridge) but drops anything
// addressed outside suiteRange on node0, and the machine's end carries only
// hostIP and the route to podCIDR: nothing reaches the machine's network.
type nodeNetns struct {
	name    string
	path    string // /run/netns/<name>
	hostEnd string // the veth's end in the machine's namespace
}

func newNodeNetns(ctx context.Context, name string) (*nodeNetns, error) {
	// Interface names are at most 15 bytes: cn + the work directory's suffix.
	suffix := name[strings.LastIndex(name, "-")+1:]
	if len(suffix) > 12 {
		suffix = suffix[len(suffix)-12:]
	}
	n := &nodeNetns{name: name, path: "/run/netns/" + name, hostEnd: "cn" + suffix}
	if err := ip(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"-n", name, "link", "set", "lo", "up"},
		{"link", "add", n.hostEnd, "type", "veth", "peer", "name", "node0", "netns", name},
		{"addr", "add", hostIP + "/24", "dev", n.hostEnd},
		{"link", "set", n.hostEnd, "up"},
		{"-n", name, "addr", "add", nodeCIDR, "dev", "node0"},
		{"-n", name, "link", "set", "node0", "up"},
		{"-n", name, "route", "add", "default", "via", hostIP, "dev", "node0"},
		{"route", "add", podCIDR, "via", nodeIP, "dev", n.hostEnd},
	}
	for _, args := range steps {
		if err := ip(ctx, args...); err != nil {
			return n, err
		}
	}
	return n, n.guard(ctx)
}

// guard turns forwarding on inside the namespace (Pods <-> node0) and
// drops, on node0, every packet to an address outside suiteRange: sent by
// the node or forwarded for a Pod.
func (n *nodeNetns) guard(ctx context.Context) error {
	if err := n.exec(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return err
	}
	for _, chain := range []string{"OUTPUT", "FORWARD"} {
		if err := n.exec(ctx, "iptables", "-w", "-A", chain, "-o", "node0", "!", "-d", suiteRange, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// exec runs a command inside the namespace.
func (n *nodeNetns) exec(ctx context.Context, args ...string) error {
	return ip(ctx, append([]string{"netns", "exec", n.name}, args...)...)
}

// dnat makes connections from Pods in from (a CIDR) to vip:vport (a
// Service's ClusterIP) go to to (host:port) inside the namespace: the one
// Service rule kube-proxy would program for it.
func (n *nodeNetns) dnat(ctx context.Context, from, vip, vport, to string) error {
	return n.exec(ctx, "iptables", "-w", "-t", "nat", "-A", "PREROUTING", "-s", from, "-d", vip+"/32", "-p", "tcp",
		"--dport", vport, "-j", "DNAT", "--to-destination", to)
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
