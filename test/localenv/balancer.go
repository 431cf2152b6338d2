package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// probeInterval is how often the Balancer asks each replica's /readyz: the
// kubelet's readiness probe at its fastest setting.
const probeInterval = 200 * time.Millisecond

// Balancer plays the Service in front of several Courier replicas, as
// kube-proxy and the kubelet's readiness probes do in a cluster: each TCP
// connection goes to a replica whose /readyz answered 200 at the last
// probe (round robin), so the aggregator reaches whichever replica is up.
// Courier replicas run on the host, where the aggregator cannot route to
// Pod IPs; everything behind the Balancer is the real Courier.
type Balancer struct {
	// Port is where the Balancer listens on 127.0.0.1 (the Service's port).
	Port int

	ln       net.Listener
	backends []*backend
	next     atomic.Uint64
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

type backend struct {
	addr   string
	health string
	client *http.Client
	ready  atomic.Bool
}

// newBalancer listens on a port reserved for e and forwards to the
// replicas, probing each one's /readyz with its Config (which trusts the
// serving CA).
func (e *Env) newBalancer(replicas []*Courier) (*Balancer, error) {
	ln, err := e.listenReserved()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Balancer{Port: ln.Addr().(*net.TCPAddr).Port, ln: ln, stop: cancel}
	for _, r := range replicas {
		hc, err := rest.HTTPClientFor(r.Config)
		if err != nil {
			cancel()
			ln.Close()
			return nil, err
		}
		hc.Timeout = time.Second
		b.backends = append(b.backends, &backend{addr: "127.0.0.1:" + strconv.Itoa(r.Port), health: r.Config.Host + "/readyz", client: hc})
	}
	for _, be := range b.backends {
		b.wg.Add(1)
		go func() { defer b.wg.Done(); be.probe(ctx) }()
	}
	b.wg.Add(1)
	go func() { defer b.wg.Done(); b.serve(ctx) }()
	return b, nil
}

func (be *backend) probe(ctx context.Context) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		resp, err := be.client.Get(be.health)
		ok := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		be.ready.Store(ok)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Ready reports how many replicas passed their last readiness probe.
func (b *Balancer) Ready() int {
	n := 0
	for _, be := range b.backends {
		if be.ready.Load() {
			n++
		}
	}
	return n
}

// WaitReady waits until exactly n replicas are ready, as a Service's
// endpoints would show them.
func (b *Balancer) WaitReady(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b.Ready() == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeInterval / 2):
		}
	}
	return fmt.Errorf("balancer: %d of %d replicas ready after %s, want %d", b.Ready(), len(b.backends), timeout, n)
}

func (b *Balancer) serve(ctx context.Context) {
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.forward(ctx, conn) }()
	}
}

// forward connects conn to a ready replica, trying each ready one once,
// and copies both ways until either side closes.
func (b *Balancer) forward(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	start := int(b.next.Add(1))
	var up net.Conn
	for i := range b.backends {
		be := b.backends[(start+i)%len(b.backends)]
		if !be.ready.Load() {
			continue
		}
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", be.addr)
		if err == nil {
			up = c
			break
		}
	}
	if up == nil {
		return // no ready replica: the Service has no endpoints
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Close stops listening and forwarding.
func (b *Balancer) Close() {
	b.stop()
	b.ln.Close()
	b.wg.Wait()
}

// listenReserved listens on 127.0.0.1 on a port reserved for e, on another
// one if something outside localenv took it since it was checked.
func (e *Env) listenReserved() (net.Listener, error) {
	for attempt := 1; ; attempt++ {
		ports, err := e.reservePorts(1)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[0]))
		if err == nil {
			return ln, nil
		}
		e.releasePorts(ports[0])
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == maxPortAttempts {
			return nil, err
		}
	}
}
