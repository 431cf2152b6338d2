package engine

import (
	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// Pulled reports whether a Cluster is delivered by its own courier-agent
// (annotation courier.dev/agent-user, DESIGN §9) rather than pushed. Push
// and pull are never both used for one Cluster: the push engine neither
// writes, sweeps nor records anything for a pulled Cluster, whose rows
// show what its agent reports. The agent runs this same engine over a
// Cluster it synthesizes without the annotation.
func Pulled(cluster *fleet.Cluster) bool {
	_, ok := cluster.Annotations[courier.AnnotationAgentUser]
	return ok
}

// leavePulled drops what the push engine held for a Cluster that is now
// pulled -- its downstream client (and so its informers), expected
// echoes, twin record, identities and leftover copies -- as when the
// Cluster is deleted: the copies already written there are the agent's to
// keep or remove.
func (e *Engine) leavePulled(key string) {
	e.forgetCluster(key)
	// Drop what the engine recorded for the Cluster's rows (a push pass
	// made before it became pulled), so that the view shows the agent's
	// reports and not a stale push status.
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
