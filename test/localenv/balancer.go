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

// probeInterval is how often the Balancer asks each replica's /readyz,
// faster than the kubelet's fastest (1 s), so that a started replica joins
// the endpoints soon after it is ready.
const probeInterval = 200 * time.Millisecond

// unansweredLimit is how long a replica's probes may go unanswered (each
// times out after 1 s) before it leaves the endpoints: the chart's
// readinessProbe, failureThreshold 3 probes periodSeconds 5 apart, the
// third timing out 10 s after the first. A replica too busy to answer a
// probe within a second stays in, as it would in a cluster. A replica
// that answers "not ready" (shutting down, not synced) or refuses the
// connection (gone) leaves at once: Kubernetes takes a terminating Pod
// out of a Service's endpoints without waiting for probes.
const unansweredLimit = 10 * time.Second

// probeOutcome is what one readiness probe found.
type probeOutcome int

const (
	probeReady      probeOutcome = iota // 200
	probeNotReady                       // answered, not 200; or the connection refused or broken
	probeUnanswered                     // no answer within the probe's timeout
)

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
	// dropped counts connections closed because no replica was ready.
	dropped atomic.Int64
}

type backend struct {
	addr   string
	health string
	client *http.Client
	ready  atomic.Bool
	// unansweredSince is when its probes began to go unanswered; zero
	// while they are answered (the probe loop's own).
	unansweredSince time.Time
	// unready counts the times the replica left the endpoints.
	unready atomic.Int64
}

// BalancerStats is what the Balancer did to connections: what a Service
// would show as endpoints coming and going.
type BalancerStats struct {
	// Dropped is the connections closed because no replica was ready.
	Dropped int64
	// Unready is the times a replica left the endpoints, all replicas.
	Unready int64
}

// Stats returns the counts since the Balancer started.
func (b *Balancer) Stats() BalancerStats {
	s := BalancerStats{Dropped: b.dropped.Load()}
	for _, be := range b.backends {
		s.Unready += be.unready.Load()
	}
	return s
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
		be.observe(be.probeOnce(), time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probeOnce asks the replica's /readyz once.
func (be *backend) probeOnce() probeOutcome {
	resp, err := be.client.Get(be.health)
	if err != nil {
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			return probeUnanswered
		}
		return probeNotReady
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return probeNotReady
	}
	return probeReady
}

// observe takes the outcome of a probe that ended at now: in at the first
// ready answer; out at a not-ready one, or once probes have gone
// unanswered for unansweredLimit. Only the probe loop calls it.
func (be *backend) observe(o probeOutcome, now time.Time) {
	leave := false
	switch o {
	case probeReady:
		be.unansweredSince = time.Time{}
		be.ready.Store(true)
	case probeNotReady:
		be.unansweredSince = time.Time{}
		leave = true
	case probeUnanswered:
		if be.unansweredSince.IsZero() {
			be.unansweredSince = now
		}
		leave = now.Sub(be.unansweredSince) >= unansweredLimit
	}
	if leave && be.ready.Swap(false) {
		be.unready.Add(1)
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
		b.dropped.Add(1)
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
