// Package retry paces courier-agent's requests to the management cluster
// (docs/pull.md#many-agents-the-upstreams-priority-and-fairness): after a
// 429 no request of the agent leaves before the answer's Retry-After has
// passed, plus a random part of it; after other failures (5xx, no answer)
// the agent waits exponentially longer, with jitter; and a starting agent
// waits a random part of --initial-jitter before its first request.
//
// The jitter is the point: thousands of agents refused in the same instant
// and told the same Retry-After would otherwise all come back in the same
// instant too, and be refused again.
//
// The computation (Backoff, InitialDelay) is pure, fed a random sample, so
// that it can be tested by table; Gate applies it to every request of an
// http.RoundTripper.
package retry

import (
	"time"
)

// Backoff says how long to wait after failures.
type Backoff struct {
	// Initial is the wait after one failure without a Retry-After; each
	// further failure in a row doubles it, up to Max.
	Initial, Max time.Duration
	// Jitter is the random part: a wait d becomes d plus up to Jitter×d.
	Jitter float64
	// MaxRetryAfter bounds the Retry-After honoured, so that one wrong
	// answer cannot stop the agent for hours.
	MaxRetryAfter time.Duration
}

// DefaultBackoff is courier-agent's: 1 s doubling to 30 s, as the
// reflector's own backoff on errors (a longer one would delay the agents'
// return after Courier or the upstream comes back), half again at most as
// jitter, and a Retry-After of up to 10 minutes honoured.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 30 * time.Second, Jitter: 0.5, MaxRetryAfter: 10 * time.Minute}

// Delay returns the wait after failures failures in a row (at least 1),
// the last answered with retryAfter (0: none), for a random sample in
// [0, 1): the larger of the exponential step and retryAfter (bounded by
// MaxRetryAfter), plus its jitter. It is never less than retryAfter.
func (b Backoff) Delay(failures int, retryAfter time.Duration, sample float64) time.Duration {
	d := b.step(failures)
	if b.MaxRetryAfter > 0 && retryAfter > b.MaxRetryAfter {
		retryAfter = b.MaxRetryAfter
	}
	d = max(d, retryAfter)
	return d + jitter(d, b.Jitter, sample)
}

// step is Initial doubled failures-1 times, at most Max.
func (b Backoff) step(failures int) time.Duration {
	if failures < 1 || b.Initial <= 0 {
		return 0
	}
	d := b.Initial
	for i := 1; i < failures; i++ {
		if b.Max > 0 && d >= b.Max {
			break
		}
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	return d
}

// jitter is up to fraction×d, picked by sample in [0, 1).
func jitter(d time.Duration, fraction, sample float64) time.Duration {
	if fraction <= 0 || d <= 0 {
		return 0
	}
	sample = min(max(sample, 0), 1)
	return time.Duration(sample * fraction * float64(d))
}

// InitialDelay is how long a starting agent waits before its first
// request: a point in [0, window) picked by sample in [0, 1), so that
// agents started together (a fleet-wide rollout, a power cut) spread
// their first connections over the window.
func InitialDelay(window time.Duration, sample float64) time.Duration {
	if window <= 0 {
		return 0
	}
	return min(time.Duration(min(max(sample, 0), 1)*float64(window)), window-1)
}
