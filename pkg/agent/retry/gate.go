package retry

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Gate holds every request of one agent to the management cluster until
// the wait its last failures call for has passed (Backoff.Delay): a 429 or
// 503 with Retry-After: N keeps every request back for at least N seconds
// plus jitter; a 429 or 5xx without it, or no answer at all, for an
// exponentially growing, jittered wait; any other answer ends the run of
// failures. One Gate is shared by all the agent's clients (its watch, its
// payload reads, its reports): the upstream's Retry-After speaks of the
// agent, not of one request.
//
// Gate is the one place that waits. It removes the Retry-After header from
// the answers it passes on, so that client-go does not also sleep inside
// the request (it would, up to ten times, without jitter: the herd would
// stay in step) and the caller's own loop (the reflector, the engine's
// queue, the reporter) sees the 429 at once and tries again through the
// Gate.
type Gate struct {
	backoff Backoff
	clock   clock.Clock
	sample  func() float64

	mu        sync.Mutex
	notBefore time.Time
	failures  int
}

// NewGate returns a Gate waiting as b says.
func NewGate(b Backoff) *Gate {
	return &Gate{backoff: b, clock: clock.RealClock{}, sample: rand.Float64}
}

// Wrap returns rt behind the Gate; it fits rest.Config's WrapTransport.
func (g *Gate) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &gated{gate: g, next: rt}
}

// NotBefore is when the next request may leave; the zero time when it may
// leave now.
func (g *Gate) NotBefore() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.notBefore
}

// wait blocks until the Gate lets a request leave or done is closed.
func (g *Gate) wait(done <-chan struct{}) error {
	for {
		d := g.NotBefore().Sub(g.clock.Now())
		if d <= 0 {
			return nil
		}
		select {
		case <-done:
			return errors.New("gave up waiting for the upstream's Retry-After or backoff")
		case <-g.clock.After(d):
			// NotBefore may have moved meanwhile: look again.
		}
	}
}

// observe records an answer (or its absence), and returns the Retry-After
// it carried.
func (g *Gate) observe(resp *http.Response, err error) {
	failed, retryAfter := judge(resp, err)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !failed {
		g.failures = 0
		return
	}
	g.failures++
	until := g.clock.Now().Add(g.backoff.Delay(g.failures, retryAfter, g.sample()))
	if until.After(g.notBefore) {
		g.notBefore = until
	}
}

// judge says whether an answer is a failure that calls for waiting, and
// the Retry-After it carries (0: none or unreadable).
func judge(resp *http.Response, err error) (bool, time.Duration) {
	if err != nil {
		return true, 0
	}
	code := resp.StatusCode
	if code != http.StatusTooManyRequests && code < 500 {
		return false, 0
	}
	return true, retryAfter(resp.Header.Get("Retry-After"))
}

// retryAfter reads a Retry-After in seconds, as the kube-apiserver and
// Courier send it.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// gated is one transport behind the Gate.
type gated struct {
	gate *Gate
	next http.RoundTripper
}

var _ http.RoundTripper = (*gated)(nil)

// RoundTrip waits for the Gate, sends req and records the answer. A
// request given up while waiting (its context done) is not sent and not
// counted as a failure.
func (t *gated) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.gate.wait(req.Context().Done()); err != nil {
		return nil, errors.Join(err, req.Context().Err())
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil && req.Context().Err() != nil {
		return resp, err // the caller gave up; the upstream said nothing
	}
	t.gate.observe(resp, err)
	if resp != nil && resp.Header.Get("Retry-After") != "" {
		resp.Header.Del("Retry-After")
	}
	return resp, err
}
