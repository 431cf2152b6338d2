package engine

import (
	"context"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
)

// resyncSlots is how many parts the resync period is cut into. Each
// Cluster gets its whole pass (drift repair, the sweep of copies nothing
// wants) once per period, in the part its key hashes to: 1,000 Clusters
// over 5 minutes are about 17 passes every 5 s rather than 1,000 queued
// at once, a burst that a source change arriving with it had to wait
// behind (docs/benchmarks.md). A Cluster keeps its part from period to
// period, so each still waits one period between resyncs.
const resyncSlots = 60

// runResync queues, every ResyncPeriod/resyncSlots, the whole pass of the
// Clusters of the next part, once every HelmOp has been seen.
func (e *Engine) runResync(ctx context.Context) {
	slot := 0
	wait.UntilWithContext(ctx, func(context.Context) {
		if e.desired.isComplete() {
			e.queueResyncSlot(slot)
		}
		slot = (slot + 1) % resyncSlots
	}, e.cfg.ResyncPeriod/resyncSlots)
}

// queueResyncSlot queues the whole pass of every Cluster in part slot.
func (e *Engine) queueResyncSlot(slot int) {
	clusters, err := e.cfg.Clusters.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, c := range clusters {
		if key := c.Namespace + "/" + c.Name; resyncSlot(key) == slot {
			e.queueWhole(key)
		}
	}
}

// resyncSlot is the part of the resync period a Cluster's key belongs to.
func resyncSlot(clusterKey string) int {
	h := fnv.New32a()
	h.Write([]byte(clusterKey))
	return int(h.Sum32() % resyncSlots)
}
