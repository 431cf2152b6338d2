package engine

import (
	"github.com/courier-dev/courier/pkg/copycontract"
)

// Delivers reports whether this replica delivers to the Cluster clusterKey
// ("<namespace>/<name>") now: with sharding, while it holds the Cluster's
// bucket; without, while it leads. The view shows a delivered Cluster's
// rows from the engine's own record, any other's from what its deliverer
// published (Config.Publish).
func (e *Engine) Delivers(clusterKey string) bool { return e.delivers(clusterKey) }

// LeftoversKnown reports whether the engine's leftovers of a Cluster
// ("<namespace>/<name>") are its own finding: a sweep of the Cluster found
// them since the engine last gained (or forgot) it. Until then the view
// shows what the Cluster's previous deliverer published.
func (e *Engine) LeftoversKnown(clusterKey string) bool {
	return e.statuses.swept(clusterKey)
}

// publish hands Config.Publish the statuses recorded for every row of a
// pushed Cluster this replica delivers to, after a pass over it. It is
// called after every pass, changed or not: the receiver writes only what
// differs from what is upstream (clusterstatus.Store.Publish), so a pass
// that changed nothing costs a comparison, and a pass that changed every
// row of the Cluster one write for the Cluster. A replica that does not
// deliver to the Cluster (it lost the bucket during the pass, or never
// held it) publishes nothing: the deliverer's word is the only one kept.
//
// The Cluster's leftover copies go with the statuses: only the deliverer
// sweeps the Cluster, and every replica shows their rows. Until its first
// sweep since it gained the Cluster it has none to tell (nil), and the
// receiver keeps what its predecessor published rather than erase it.
func (e *Engine) publish(clusterKey string) {
	if !e.delivers(clusterKey) {
		return
	}
	e.publishRecord(clusterKey)
}

// publishRecord is publish without asking whether this replica delivers:
// BucketsChanged calls it for the Clusters of a bucket being handed over,
// whose last passes' statuses must reach the object before the bucket is
// released (Owns is false for it by then).
func (e *Engine) publishRecord(clusterKey string) {
	if e.cfg.Publish == nil {
		return
	}
	ns, name := copycontract.SplitKey(clusterKey)
	cluster, err := e.cfg.Clusters.Clusters(ns).Get(name)
	if err != nil || !pushed(cluster) {
		return // gone, or its agent reports, or nobody delivers (docs/design.md#pull-delivery)
	}
	copies := e.desired.copiesFor(clusterKey)
	rows := make(map[string]copycontract.Status, len(copies))
	for _, c := range copies {
		if st, ok := e.statuses.status(c.rowKey); ok {
			rows[c.rowKey] = st
		}
	}
	left, _ := e.statuses.leftoversIn(clusterKey) // nil until swept: the object's stay
	e.cfg.Publish(clusterKey, rows, left)
}
