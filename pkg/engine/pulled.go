package engine

import (
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/delivery"
)

// pushed reports whether the push engine delivers a Cluster: whether
// delivery.Of answers that the replicas push it
// (docs/design.md#pull-delivery). Push and pull are never both used for
// one Cluster: the push engine neither writes, sweeps nor records anything
// for a pulled Cluster, whose rows show what its agent reports, nor for
// one that nobody delivers (a malformed agent annotation), whose rows say
// why. The agent runs this same engine over a Cluster it synthesizes
// without the annotation.
func pushed(cluster *fleet.Cluster) bool {
	return delivery.Of(cluster).Pushed()
}

// leave drops what the push engine held for a Cluster it no longer
// writes to -- one that is now pulled or delivered by nobody, or, with sharding, one whose bucket
// another replica holds -- as when the Cluster is deleted: its downstream
// client (and so its informers and connections), expected echoes, twin
// record, identities, leftover copies and the statuses of its rows, so
// that the view shows the agent's reports, or what the deliverer
// published, and not a stale status of this replica. The copies already
// written there are the agent's, or the other replica's, to keep or
// remove. Leaving a Cluster already left costs a few map lookups.
func (e *Engine) leave(key string) {
	e.forgetCluster(key)
	copies := e.desired.copiesFor(key)
	keys := make([]string, len(copies))
	for i, c := range copies {
		keys[i] = c.rowKey
	}
	forgot := e.statuses.forget(keys)
	if e.statuses.setLeftovers(key, nil) || forgot {
		e.notify()
	}
}

// forgetCluster drops what the engine keeps to reach and write to a
// cluster: its downstream client (and so its informers), expected echoes,
// client record, identities, the copies it found current, the names it
// found taken and the scope of its next pass.
func (e *Engine) forgetCluster(key string) {
	e.cfg.Downstream.Forget(key)
	e.forgetEchoes(key)
	e.clients.forget(key)
	e.forgetIdentities(key)
	e.current.forget(key)
	e.taken.forget(key)
	e.scopes.forget(key)
	clusterReachable.DeleteLabelValues(key)
}
