package engine

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"k8s.io/apimachinery/pkg/types"
)

// Client-go's Event spam filter lets a burst of 25 Events of one type about
// one object through, then one per five minutes (tools/record,
// defaultSpamBurst and defaultSpamQPS).
const (
	copiedEventBurst    = 25
	copiedEventInterval = 5 * time.Minute
)

// eventBudget lets a HelmOp's Copied Events through at the rate client-go's
// spam filter would let them reach the API server, and drops the rest
// before they are made.
//
// A change of one source listed for 1,000 Clusters writes 1,000 copies,
// one per pass. The recorder built an Event for each, and its correlator
// computed an aggregation key and a merge patch for each, before its spam
// filter dropped all but the first 25 of the HelmOp's life: 6 % of
// Courier's CPU in that round (docs/benchmarks.md). What reaches the API
// server is the same: the spam filter still applies after this, to every
// Event. Warnings are never dropped here; they are rarer, and each says
// something new.
type eventBudget struct {
	mu   sync.Mutex
	byOp map[types.NamespacedName]*rate.Limiter
}

func newEventBudget() *eventBudget {
	return &eventBudget{byOp: map[types.NamespacedName]*rate.Limiter{}}
}

// allow reports whether a Copied Event about helmOp may be recorded now.
func (b *eventBudget) allow(helmOp types.NamespacedName, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.byOp[helmOp]
	if !ok {
		l = rate.NewLimiter(rate.Every(copiedEventInterval), copiedEventBurst)
		b.byOp[helmOp] = l
	}
	return l.AllowN(now, 1)
}

// forget drops a HelmOp that has no rows any more.
func (b *eventBudget) forget(helmOp types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byOp, helmOp)
}
