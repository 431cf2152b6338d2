package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/sharding"
)

// Which Clusters the replicas push at all is delivery.Of's answer
// (pushed, pulled.go); this file fences the writes for those Clusters by
// the terms of the buckets this replica holds, which no name in a Lease
// (delivery.By's answer, for the DELIVERED-BY column) can replace.

// Shards says which Clusters this replica delivers to when delivery is
// shared by every replica (docs/design.md#scale-out): those of the buckets it holds.
// sharding.Manager implements it.
type Shards interface {
	// Owns reports whether this replica may write for bucket now. It
	// turns false on its own when the replica's term ends.
	Owns(bucket int) bool
}

// ShardConfig turns sharded delivery on (Config.Shards).
type ShardConfig struct {
	// Shards holds the buckets.
	Shards Shards
	// Buckets is how many buckets Clusters hash into (sharding.Bucket).
	Buckets int
	// WriteTimeout bounds every downstream write, so that one started
	// just before this replica's term ends lands or is abandoned before a
	// successor may start: it must be below the lease duration minus the
	// renew deadline (docs/scale-out.md, "Why never two writers").
	WriteTimeout time.Duration
}

// errHandedOver refuses a write for a Cluster this replica no longer
// delivers to (its bucket was lost during the pass); the next pass over
// the Cluster drops it.
var errHandedOver = errors.New("this replica no longer delivers to the cluster; the replica holding its bucket writes")

// deliveryGate counts, per bucket, the downstream writes in flight, so
// that BucketsChanged can wait for them before a lost bucket is released.
type deliveryGate struct {
	mu      sync.Mutex
	idle    *sync.Cond
	writing map[int]int // guarded by mu
}

func newDeliveryGate() *deliveryGate {
	g := &deliveryGate{writing: map[int]int{}}
	g.idle = sync.NewCond(&g.mu)
	return g
}

// delivers reports whether this replica writes for the Cluster clusterKey
// now: with sharding, while it holds the Cluster's bucket; without, while
// it leads.
func (e *Engine) delivers(clusterKey string) bool {
	s := e.cfg.Shards
	if s == nil {
		return e.leading.Load()
	}
	return s.Shards.Owns(e.bucketOf(clusterKey))
}

// writerName is who writes for a Cluster this replica does not deliver
// to, as row messages name it.
func (e *Engine) writerName() string {
	if e.cfg.Shards == nil {
		return "the leader"
	}
	return "the replica holding its bucket"
}

func (e *Engine) bucketOf(clusterKey string) int {
	ns, name := copycontract.SplitKey(clusterKey)
	return sharding.Bucket(ns, name, e.cfg.Shards.Buckets)
}

// writeKey is the context key of a pass's write gate (withCluster).
type writeKey struct{}

// writeGate admits one downstream write (beginWrite).
type writeGate func(ctx context.Context) (context.Context, func(), error)

// withCluster marks ctx as a pass over clusterKey: with sharding, every
// downstream write made with it goes through beginWrite.
func (e *Engine) withCluster(ctx context.Context, clusterKey string) context.Context {
	if e.cfg.Shards == nil {
		return ctx
	}
	return context.WithValue(ctx, writeKey{}, writeGate(func(ctx context.Context) (context.Context, func(), error) {
		return e.beginWrite(ctx, clusterKey)
	}))
}

// admitWrite is called before every downstream write (create, update,
// delete of a copy, a namespace's create) with the write's context:
// outside a sharded pass it admits the write as it is.
func admitWrite(ctx context.Context) (context.Context, func(), error) {
	if g, ok := ctx.Value(writeKey{}).(writeGate); ok {
		return g(ctx)
	}
	return ctx, func() {}, nil
}

// beginWrite admits one downstream write for clusterKey: it refuses
// (errHandedOver) when this replica does not deliver to the Cluster, else
// counts the write in flight until end is called, and bounds it by
// WriteTimeout. The check and the count are one step under the gate's
// lock, and a lost bucket's Owns is false before BucketsChanged is told:
// a write is either refused or waited for.
func (e *Engine) beginWrite(ctx context.Context, clusterKey string) (_ context.Context, end func(), _ error) {
	b := e.bucketOf(clusterKey)
	g := e.gate
	g.mu.Lock()
	if !e.cfg.Shards.Shards.Owns(b) {
		g.mu.Unlock()
		return ctx, nil, errHandedOver
	}
	g.writing[b]++
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Shards.WriteTimeout)
	return ctx, func() {
		cancel()
		g.mu.Lock()
		if g.writing[b]--; g.writing[b] <= 0 {
			delete(g.writing, b)
			g.idle.Broadcast()
		}
		g.mu.Unlock()
	}, nil
}

// BucketsChanged is sharding.Config.OnChange. For lost buckets it returns
// once no write for their Clusters is in flight (each is bounded by
// WriteTimeout; a pass over one of them writes nothing more), which
// acknowledges the loss, and queues their Clusters, whose next pass drops
// their downstream clients, informers and statuses (passCluster, leave).
// Each Cluster of a gained bucket is queued for a whole pass, which starts
// its client and informers, with its retry backoff forgotten: failures
// counted before a hand-over must not delay the new owner's retries by up
// to MaxBackoff. Until that pass records a row, the row shows what the
// previous deliverer published.
func (e *Engine) BucketsChanged(gained, lost []int) {
	if len(lost) > 0 {
		e.gate.mu.Lock()
		for _, b := range lost {
			for e.gate.writing[b] > 0 {
				e.gate.idle.Wait()
			}
		}
		e.gate.mu.Unlock()
		e.publishLost(lost)
	}
	if !e.desired.isComplete() {
		return // no pass yet, nothing held; DesiredComplete queues every Cluster
	}
	e.queueBuckets(append(append([]int(nil), gained...), lost...))
}

// queueBuckets queues every Cluster of the buckets for a whole pass.
func (e *Engine) queueBuckets(buckets []int) {
	if len(buckets) == 0 {
		return
	}
	want := map[int]bool{}
	for _, b := range buckets {
		want[b] = true
	}
	clusters, err := e.cfg.Clusters.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, c := range clusters {
		key := c.Namespace + "/" + c.Name
		if want[e.bucketOf(key)] {
			e.queue.Forget(key)
			e.queueWhole(key)
		}
	}
}
