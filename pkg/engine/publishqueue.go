package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Publishing yields to copying. A pass records its outcomes at once (the
// view shows them on this replica without waiting), but the Cluster's
// status object upstream (publish.go) is written only once the engine has
// no pass queued or running, or when the Cluster has waited MaxPublishDelay.
// A change of one source at 1,000 Clusters is 1,000 passes and 1,000
// status objects: written as each pass ended, they were half of the
// machine's work while copies were still on their way (docs/benchmarks.md,
// "What the profiles show"), and a copy is what a workload waits for;
// the other replicas' rows follow within MaxPublishDelay.

// DefaultMaxPublishDelay bounds how long a Cluster's status object waits
// for the engine to go idle. It outlasts a fan-out of 10,000 copies on two
// cores (17 to 27 s in `make bench` at N=1,000): with 5 s, a change of
// every source published most of its 1,000 status objects inside its own
// fan-out, where the upstream kube-apiserver and Courier spent about 6 s
// of CPU more than on the same-shape pool's (docs/benchmarks.md). A
// fan-out's final statuses go out as soon as it ends, whatever the bound;
// only other replicas' view of a fan-out still going trails by up to it.
const DefaultMaxPublishDelay = 30 * time.Second

// publishPoll is how often waiting publishes look again at whether the
// engine went idle.
const publishPoll = 100 * time.Millisecond

// publishQueue is the Clusters whose statuses wait to be published, each
// with when it first waited. Its lock is taken alone.
type publishQueue struct {
	mu      sync.Mutex
	pending map[string]time.Time
	wake    chan struct{} // one token: something is pending
}

func newPublishQueue() *publishQueue {
	return &publishQueue{pending: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// mark queues a Cluster's publish; a Cluster already waiting keeps its
// first time, so a stream of passes over it cannot hold it back past the
// bound.
func (q *publishQueue) mark(clusterKey string, now time.Time) {
	q.mu.Lock()
	if _, ok := q.pending[clusterKey]; !ok {
		q.pending[clusterKey] = now
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// markNow queues a Cluster's publish for the publisher's next look,
// whether or not the engine is idle.
func (q *publishQueue) markNow(clusterKey string) {
	q.mu.Lock()
	q.pending[clusterKey] = time.Time{} // waited longer than any bound
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// due takes the Clusters to publish now: every waiting one when the engine
// is idle, else those that have waited maxDelay.
func (q *publishQueue) due(now time.Time, idle bool, maxDelay time.Duration) []string {
	return q.take(func(_ string, since time.Time) bool { return idle || now.Sub(since) >= maxDelay })
}

// take takes the waiting Clusters for which pick, given the Cluster and
// when it first waited, is true.
func (q *publishQueue) take(pick func(clusterKey string, since time.Time) bool) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for k, since := range q.pending {
		if pick(k, since) {
			out = append(out, k)
			delete(q.pending, k)
		}
	}
	return out
}

// empty reports whether nothing waits.
func (q *publishQueue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending) == 0
}

// passCounter counts the passes running now.
type passCounter struct{ n atomic.Int32 }

func (p *passCounter) start() func() {
	p.n.Add(1)
	return func() { p.n.Add(-1) }
}

// idle reports whether no Cluster is queued for a pass and none is in one.
// A Cluster waiting out a retry backoff is neither: its failure is not
// copying, and must not hold statuses back.
func (e *Engine) idle() bool {
	return e.queue.Len() == 0 && e.passes.n.Load() == 0
}

// publishDue publishes the Clusters due now (publishQueue.due).
func (e *Engine) publishDue() {
	for _, k := range e.toPublish.due(e.now(), e.idle(), e.cfg.MaxPublishDelay) {
		e.publish(k)
	}
}

// publishAll publishes every waiting Cluster: the engine stops, and what
// its last passes found must reach the object before another replica (or
// this one, restarted) reads it.
func (e *Engine) publishAll() {
	for _, k := range e.toPublish.due(e.now(), true, 0) {
		e.publish(k)
	}
}

// publishLost publishes, at once, the waiting Clusters of buckets this
// replica is handing over (BucketsChanged, before their Leases are
// released), so that the next holder starts from the last passes'
// statuses.
func (e *Engine) publishLost(lost []int) {
	in := map[int]bool{}
	for _, b := range lost {
		in[b] = true
	}
	for _, k := range e.toPublish.take(func(k string, _ time.Time) bool { return in[e.bucketOf(k)] }) {
		e.publishRecord(k)
	}
}

// runPublisher publishes waiting Clusters as they fall due until ctx is
// done. It sleeps while none waits.
func (e *Engine) runPublisher(ctx context.Context) {
	t := time.NewTimer(publishPoll)
	defer t.Stop()
	for {
		if e.toPublish.empty() {
			select {
			case <-ctx.Done():
				return
			case <-e.toPublish.wake:
			}
		}
		t.Reset(publishPoll)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.publishDue()
	}
}
