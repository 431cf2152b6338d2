package copyview

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/copycontract"
)

// Leftover copies (Kept, Deleting) are found by the sweep of whoever
// delivers to their Cluster, and every replica shows their rows (docs/design.md#scale-out):
// the engine's own for the pushed Clusters this replica
// delivers to, what the deliverer published in the Cluster's status
// object (clusterstatus.Store.Publish, key _leftovers) for the pushed
// Clusters it does not, or has not swept since it gained them
// (Engine.LeftoversKnown: until its first sweep it shows its predecessor's
// word, as for a row's status). Which one is decided by the engine, as
// for a row's status (delivery), never by a displayed field. A pulled Cluster's
// copies are its agent's, which reports its rows only: no leftover rows
// show for it, from the engine (which leaves a pulled Cluster) or from an
// object (an agent's report holds none).

// leftovers returns one owner's leftover copies as their Clusters'
// deliverers found them.
func (c *Controller) leftovers(op types.NamespacedName) []copycontract.Leftover {
	own := c.engine.Leftovers(op)
	if c.inputs.Reports == nil {
		return own // nothing published to show: the engine's word alone
	}
	var out []copycontract.Leftover
	for _, l := range own {
		if c.ownLeftovers(clusterKeyOf(l)) {
			out = append(out, l)
		}
	}
	for _, l := range c.inputs.Reports.Leftovers(op) {
		if c.ownLeftovers(clusterKeyOf(l)) || !c.pushed(l.HelmOp.Namespace, l.Cluster) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// ownLeftovers reports whether a Cluster's leftovers shown are the
// engine's: it delivers to the Cluster and has swept it since.
func (c *Controller) ownLeftovers(clusterKey string) bool {
	return c.engine.Delivers(clusterKey) && c.engine.LeftoversKnown(clusterKey)
}

// clusterKeyOf is the key of a leftover's Cluster: a copy is written for
// owners of its Cluster's namespace only.
func clusterKeyOf(l copycontract.Leftover) string {
	return l.HelmOp.Namespace + "/" + l.Cluster
}

// pushed reports whether a Cluster exists and the replicas push it
// (clusterdelivery.Of): not pulled, and not delivered by nobody.
func (c *Controller) pushed(namespace, cluster string) bool {
	a, known := c.deliveryOf(namespace, cluster)
	return known && a.Pushed()
}

// LeftoversChanged is told that an owner's leftover copies changed in a
// Cluster's status object: its leftover rows are synced again, and
// nothing else.
func (c *Controller) LeftoversChanged(owner types.NamespacedName) {
	c.StatusChanged([]copycontract.StatusChange{{HelmOp: owner, Leftovers: true}})
}
