package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/downstream"
)

// A Cluster that does not answer is retried with the queue's backoff,
// which doubles up to MaxBackoff (2 minutes): after a minute down, the
// next pass may be a minute away. That bound protects the workers from
// Clusters that stay down, but a Cluster that answers again must not wait
// it out: its copies are what its workloads wait for. So while a Cluster
// is down, a probe asks it every ProbeInterval whether it answers (one
// small GET on the Cluster's own connection), and the first answer queues
// the Cluster's pass at once, its backoff forgotten. The pass's outcome
// is published at once too (reconcileCluster): a Cluster coming back (or
// going down) is news for every replica's rows, unlike the rows of a
// fan-out, whose publishing waits for the engine to go idle
// (publishqueue.go).
//
// A probe costs one goroutine per Cluster that is down and one request per
// ProbeInterval to it: a refused connection is a few microseconds, a
// silent one a goroutine parked until ProbeTimeout. Nothing is probed
// while every Cluster answers.

// DefaultProbeInterval is how often a Cluster that is down is asked
// whether it answers again: with a pass of a few hundred milliseconds
// after it, a Cluster that answers is current within about two seconds.
const DefaultProbeInterval = time.Second

// probeTimeout bounds one probe: longer than a round trip to a
// kube-apiserver that answers, short enough that a silent one is asked
// again soon.
const probeTimeout = 2 * time.Second

// errNoClient marks a pass that could not build its Cluster's client (its
// kubeconfig Secret is missing or invalid, or could not be read): its rows
// are Unreachable, but no probe would help; a change of the Secret or of
// the Cluster queues the next pass.
type errNoClient struct{ error }

func (e errNoClient) Unwrap() error { return e.error }

// passDown reports whether a pass that ended with err left its Cluster's
// rows Unreachable.
func passDown(err error) bool {
	var nc errNoClient
	return errors.As(err, &nc) || unreachable(err)
}

// probeWorthy reports whether a pass that ended with err should be
// followed by a probe: the Cluster did not answer (errNoClient is not).
func probeWorthy(err error) bool {
	var nc errNoClient
	return !errors.As(err, &nc) && unreachable(err)
}

// reachability is which Clusters' last pass found them down, and which of
// them a probe is asking. Its lock is taken alone.
type reachability struct {
	mu      sync.Mutex
	down    map[string]bool // Cluster key -> its last pass found it down
	probing map[string]bool // Cluster key -> a probe runs for it
}

func newReachability() *reachability {
	return &reachability{down: map[string]bool{}, probing: map[string]bool{}}
}

// set records whether a pass found the Cluster down and reports whether
// that differs from what the pass before it found (a Cluster never seen
// counts as up).
func (r *reachability) set(clusterKey string, down bool) (changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.down[clusterKey]
	if down {
		r.down[clusterKey] = true
	} else {
		delete(r.down, clusterKey)
	}
	return was != down
}

// isDown reports whether the Cluster's last pass found it down.
func (r *reachability) isDown(clusterKey string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down[clusterKey]
}

// startProbe reports whether the caller is to run the Cluster's probe
// (none runs for it yet); stopProbe ends that claim.
func (r *reachability) startProbe(clusterKey string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.probing[clusterKey] {
		return false
	}
	r.probing[clusterKey] = true
	return true
}

func (r *reachability) stopProbe(clusterKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.probing, clusterKey)
}

// probeUntilBack runs, unless one runs already, a probe of a Cluster whose
// pass found it down, until it answers (its pass is then queued at once),
// a pass finds it up, this replica stops delivering to it, or ctx is done.
func (e *Engine) probeUntilBack(ctx context.Context, clusterKey string) {
	if !e.reach.startProbe(clusterKey) {
		return
	}
	go func() {
		defer e.reach.stopProbe(clusterKey)
		logger := klog.FromContext(ctx).WithValues("cluster", clusterKey)
		t := time.NewTimer(jittered(e.cfg.ProbeInterval))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if e.draining.Load() || !e.reach.isDown(clusterKey) || !e.delivers(clusterKey) {
				return
			}
			if e.answers(ctx, clusterKey) {
				logger.V(2).Info("Cluster answers again; its pass starts now")
				e.queue.Forget(clusterKey)
				e.queueWhole(clusterKey)
				return
			}
			t.Reset(jittered(e.cfg.ProbeInterval))
		}
	}()
}

// answers asks the Cluster's kube-apiserver once whether it answers.
func (e *Engine) answers(ctx context.Context, clusterKey string) bool {
	ns, name := copycontract.SplitKey(clusterKey)
	cluster, err := e.cfg.Clusters.Clusters(ns).Get(name)
	if err != nil || !pushed(cluster) {
		return false // gone, pulled or delivered by nobody: the next pass (queued by that change) drops it
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	client, err := e.cfg.Downstream.Get(ctx, cluster)
	if err != nil {
		return false
	}
	return !unreachable(e.cfg.Probe(ctx, client))
}

// ProbeVersion is the default Config.Probe: a GET of /version, which every
// authenticated user may read, on the Cluster's own connection (a 401
// still counts as down: no request can succeed until its credentials
// change).
func ProbeVersion(ctx context.Context, client *downstream.Client) error {
	return client.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
}

// jittered spreads probes of Clusters that went down together over ±20 %
// of d, so that they do not arrive at one instant.
func jittered(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}
