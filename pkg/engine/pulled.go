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
	forgot := e.forgetStatuses(e.copiesFor(key))
	if e.setLeftovers(key, nil) || forgot {
		e.notify()
	}
}

// forgetStatuses drops what the engine recorded for copies (a push pass
// made before the Cluster became pulled), so that the view shows the
// agent's reports and not a stale push status. It reports whether any
// was dropped.
func (e *Engine) forgetStatuses(copies []desiredCopy) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	forgot := false
	for _, c := range copies {
		if _, ok := e.statuses[c.rowKey]; ok {
			delete(e.statuses, c.rowKey)
			e.pendingLocked(c.helmOp).rows[c.rowKey] = struct{}{}
			forgot = true
		}
	}
	return forgot
}

// forgetCluster drops what the engine keeps to reach and write to a
// cluster: its downstream client (and so its informers), expected echoes,
// twin record, identities and the copies it found current.
func (e *Engine) forgetCluster(key string) {
	e.cfg.Downstream.Forget(key)
	e.forgetEchoes(key)
	e.forgetTwin(key)
	e.forgetIdentities(key)
	e.current.forget(key)
	e.mu.Lock()
	delete(e.scopes, key)
	e.mu.Unlock()
	clusterReachable.DeleteLabelValues(key)
}
