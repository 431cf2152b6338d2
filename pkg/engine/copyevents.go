package engine

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// CopyEvents is the sink the downstream watches report changes to
// Courier's copies to (downstream.Options.OnChange = CopyChanged). The
// watches and the engine each need the other when they are built: the
// engine reads the downstream clients, and the watches tell the engine of
// every change. A CopyEvents is made first, handed to the watches, and
// given to New (Config.CopyEvents), which binds it to the engine it
// returns; no closure reaches a variable assigned later.
//
// Changes reported before it is bound are kept, one entry per Cluster,
// and handed to the engine when it is bound: to an engine that has written
// nothing yet (no write in flight, no echo expected) every change just
// queues its Cluster whole, so replaying one change per Cluster is what
// the engine would have done had it existed. Nothing is dropped, and what
// is kept is bounded by the Clusters watched.
type CopyEvents struct {
	mu     sync.Mutex
	engine *Engine
	// early are the Clusters whose copies changed before binding.
	early map[string]struct{}
}

// CopyChanged reports a change to a copy in a Cluster (obj nil when one
// was deleted); see Engine.CopyChanged.
func (c *CopyEvents) CopyChanged(clusterKey string, obj runtime.Object) {
	c.mu.Lock()
	e := c.engine
	if e == nil {
		if c.early == nil {
			c.early = map[string]struct{}{}
		}
		c.early[clusterKey] = struct{}{}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	e.CopyChanged(clusterKey, obj)
}

// bind makes e the engine the sink reports to, and hands it the changes
// reported so far. c.mu is held while they are handed over, so that a
// change reported meanwhile reaches the engine after them; the engine's
// own locks are taken under it, never the other way round.
func (c *CopyEvents) bind(e *Engine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.engine != nil {
		panic("engine: CopyEvents bound to a second engine")
	}
	c.engine = e
	for clusterKey := range c.early {
		e.CopyChanged(clusterKey, nil)
	}
	c.early = nil
}
