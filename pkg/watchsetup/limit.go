// Package watchsetup bounds how many watch requests a server sets up at
// once.
//
// A watch costs its server little once it is set up, and much while it is
// being set up: the request waits for its authentication and its
// authorization (a SubjectAccessReview for an agent a replica has not
// served yet) with its HTTP/2 stream's buffers, its filter goroutine's
// deep stack and its decoded headers held. Neither --max-requests-inflight
// (watches are long-running requests, which it does not count) nor the
// kube-apiserver's priority and fairness in front of the aggregator (it
// counts a proxied watch as set up once it is proxied) bounds those. When
// every agent of a fleet reconnects in the same instant, as after the
// upstream kube-apiserver restarts, a replica held thousands of them at
// once and its memory went past 1 GiB, which Go gives back to the system
// slowly.
//
// Limit holds a slot for a watch from its arrival until the store has
// registered its watcher, told through priority and fairness' own
// signal (k8s.io/apiserver/pkg/util/flowcontrol.WatchInitialized, which
// Courier's stores call as the kube-apiserver's watch cache does), or
// until its handler returns, whichever comes first. A watch that finds
// every slot taken waits for one, outside every filter, up to MaxWait,
// and is then answered 429 with Retry-After, which client-go's watches
// honour by retrying after it.
package watchsetup

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// MaxWait is how long a watch waits for a slot before it is refused: what
// priority and fairness lets a request wait in its queue by default (a
// quarter of the 60 s request timeout).
const MaxWait = 15 * time.Second

// RetryAfterSeconds is what a refused watch is told to wait.
const RetryAfterSeconds = 1

var (
	refused = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "watch_setups_refused_total",
		Help:           "Watch requests answered 429 (Retry-After: 1) after waiting 15s for one of --max-watch-setups-inflight slots.",
		StabilityLevel: metrics.ALPHA,
	})
	admitted = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "watch_setups_total",
		Help:           "Watch requests that got a slot among --max-watch-setups-inflight and were set up (or failed) with it.",
		StabilityLevel: metrics.ALPHA,
	})
	waiting = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "courier",
		Name:           "watch_setups_waiting",
		Help:           "Watch requests waiting for one of --max-watch-setups-inflight slots (at most 15s, then 429).",
		StabilityLevel: metrics.ALPHA,
	})
	inflight = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "courier",
		Name:           "watch_setups_inflight",
		Help:           "Watch requests being set up: arrived, and their watcher not yet registered.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// Limit returns handler with at most limit watch requests being set up at
// once; limit 0 leaves handler as it is. resolver tells a watch from
// other requests, as the handler chain's own request info will;
// serializer writes the 429 as a Status the client can read.
func Limit(handler http.Handler, limit int, resolver request.RequestInfoResolver, serializer runtime.NegotiatedSerializer) http.Handler {
	return limitWaiting(handler, limit, MaxWait, resolver, serializer)
}

// limitWaiting is Limit with watches waiting at most maxWait for a slot.
func limitWaiting(handler http.Handler, limit int, maxWait time.Duration, resolver request.RequestInfoResolver, serializer runtime.NegotiatedSerializer) http.Handler {
	if limit <= 0 {
		return handler
	}
	registerOnce.Do(func() {
		legacyregistry.MustRegister(refused)
		legacyregistry.MustRegister(inflight)
		legacyregistry.MustRegister(waiting)
		legacyregistry.MustRegister(admitted)
	})
	slots := make(chan struct{}, limit)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !isWatch(req, resolver) {
			handler.ServeHTTP(w, req)
			return
		}
		if !take(req, slots, maxWait) {
			refused.Inc()
			err := apierrors.NewTooManyRequests(fmt.Sprintf("too many watches are being set up (--max-watch-setups-inflight=%d); retry", limit), RetryAfterSeconds)
			responsewriters.ErrorNegotiated(err, serializer, schema.GroupVersion{}, w, req)
			return
		}
		admitted.Inc()
		inflight.Inc()
		s := &slot{done: make(chan struct{}), release: func() {
			inflight.Dec()
			<-slots
		}}
		defer s.Signal()
		ctx := utilflowcontrol.WithInitializationSignal(req.Context(), s)
		handler.ServeHTTP(w, req.WithContext(ctx))
	})
}

// take waits for a slot, at most maxWait, and reports whether it has
// one. A watch waits here, before any filter has run, holding its stream
// and a shallow goroutine, not the deep one its setup will need: waiting
// is cheaper than being refused, which every client would retry at the
// same instant a second later, each retry proxied by the kube-apiserver.
func take(req *http.Request, slots chan struct{}, maxWait time.Duration) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	waiting.Inc()
	defer waiting.Dec()
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	select {
	case slots <- struct{}{}:
		return true
	case <-timer.C:
		return false
	case <-req.Context().Done():
		return false
	}
}

// isWatch reports whether req asks for a watch: a GET with watch=true or
// under /watch/, as request info resolves it. Every GET passes here, and
// the chain resolves its request info again: one that cannot be a watch
// is told apart without it.
func isWatch(req *http.Request, resolver request.RequestInfoResolver) bool {
	if req.Method != http.MethodGet {
		return false
	}
	if !strings.Contains(req.URL.RawQuery, "watch") && !strings.Contains(req.URL.Path, "/watch/") {
		return false
	}
	info, err := resolver.NewRequestInfo(req)
	return err == nil && info.IsResourceRequest && info.Verb == "watch"
}

// slot is one watch's place among those being set up. It is the watch's
// initialization signal: the store's WatchInitialized gives the place
// back, as does the end of the request.
type slot struct {
	once    sync.Once
	done    chan struct{}
	release func()
}

var _ utilflowcontrol.InitializationSignal = &slot{}

// Signal gives the slot back; only the first call does.
func (s *slot) Signal() {
	s.once.Do(func() {
		s.release()
		close(s.done)
	})
}

// Wait returns once the slot is given back.
func (s *slot) Wait() { <-s.done }
