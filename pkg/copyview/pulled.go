package copyview

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/agentreport"
	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// Pulled Clusters (DESIGN §9): a Cluster with the courier.dev/agent-user
// annotation is written by its courier-agent, not by the engine, and its
// rows show what that agent reported:
//
//   - before the agent has reported on a row: Pending, waiting for it;
//   - while the agent's heartbeat is fresh: the phase, message, synced
//     resourceVersion and time it reported;
//   - once it has not been heard for three of its report intervals:
//     Unreachable, saying when it was last heard (RFC 3339).
//
// The phases the view computes itself (Invalid, SourceMissing) keep
// precedence, as over the engine's record (see overlay). A report change
// re-overlays only its Cluster's rows, and a timer at each Cluster's
// deadline does the same when the heartbeat runs out: the cost of both is
// that Cluster's rows, never every row.

// Reports are what the agents of pulled Clusters reported
// (agentreport.Store).
type Reports interface {
	// Report returns the last report of a Cluster's agent; it must not be
	// modified.
	Report(cluster types.NamespacedName) (*agentreport.Report, bool)
	// HasSynced reports whether the reports have been read: until then a
	// pulled Cluster's rows would show Pending after a restart.
	HasSynced() bool
}

// deadline is the pending re-evaluation of one pulled Cluster's rows.
type deadline struct {
	at    time.Time
	timer clock.Timer
}

// agentUser returns the agent user of a row's Cluster, and whether the
// Cluster is pulled.
func (c *Controller) agentUser(namespace, cluster string) (string, bool) {
	cl, err := c.inputs.Clusters.Clusters(namespace).Get(cluster)
	if err != nil {
		return "", false
	}
	u := cl.Annotations[courier.AnnotationAgentUser]
	return u, u != ""
}

// rowStatus returns the status to overlay on a computed row: its agent's
// report for a pulled Cluster's row, the engine's record otherwise.
func (c *Controller) rowStatus(r *courier.DownstreamCopy) (copycontract.Status, bool) {
	if user, pulled := c.agentUser(r.Namespace, r.Spec.Cluster); pulled {
		return c.reportedStatus(r, user), true
	}
	if c.engine == nil {
		return copycontract.Status{}, false
	}
	return c.engine.Status(rowKey(r))
}

// reportedStatus is a pulled Cluster's row's status from its agent's
// report. While the heartbeat is fresh it makes sure the Cluster's rows
// are looked at again when it runs out.
func (c *Controller) reportedStatus(r *courier.DownstreamCopy, user string) copycontract.Status {
	cluster := types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.Cluster}
	var rep *agentreport.Report
	if c.inputs.Reports != nil {
		rep, _ = c.inputs.Reports.Report(cluster)
	}
	if rep == nil || rep.Heartbeat.LastHeard.IsZero() {
		return waiting(user, cluster)
	}
	e, reported := rep.Rows[r.Name]
	var st copycontract.Status
	if reported {
		st = copycontract.Status{Phase: e.Phase, Message: e.Message, SyncedResourceVersion: e.SyncedResourceVersion}
		if e.LastSyncTime != nil {
			t := *e.LastSyncTime
			st.LastSyncTime = &t
		}
	}
	due := rep.Deadline()
	if !c.clock.Now().Before(due) {
		st.Phase = courier.CopyPhaseUnreachable
		st.Message = fmt.Sprintf("the courier-agent %s of Cluster %s was last heard at %s and reports every %s: nothing for %d intervals",
			user, cluster, rep.Heartbeat.LastHeard.UTC().Format(time.RFC3339), rep.Heartbeat.Interval.Duration, agentreport.MissedIntervals)
		return st
	}
	c.scheduleDeadline(cluster, due)
	if !reported {
		return waiting(user, cluster)
	}
	return st
}

func waiting(user string, cluster types.NamespacedName) copycontract.Status {
	return copycontract.Status{Phase: courier.CopyPhasePending, Message: fmt.Sprintf("waiting for the courier-agent %s of Cluster %s to report", user, cluster)}
}

// scheduleDeadline makes sure a Cluster's rows are re-evaluated at due
// (the Cluster's current deadline), replacing a timer for another one.
func (c *Controller) scheduleDeadline(cluster types.NamespacedName, due time.Time) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if d, ok := c.deadlines[cluster]; ok {
		if d.at.Equal(due) {
			return
		}
		d.timer.Stop()
	}
	c.deadlines[cluster] = deadline{at: due, timer: c.clock.AfterFunc(due.Sub(c.clock.Now()), func() {
		c.dmu.Lock()
		if d, ok := c.deadlines[cluster]; ok && d.at.Equal(due) {
			delete(c.deadlines, cluster)
		}
		c.dmu.Unlock()
		c.ReportChanged(cluster)
	})}
}

// ReportChanged is told that a pulled Cluster's report changed, or that
// its deadline passed: that Cluster's rows get their status again, and
// nothing else is recomputed.
func (c *Controller) ReportChanged(cluster types.NamespacedName) {
	c.mu.Lock()
	ops := map[types.NamespacedName]bool{}
	for key, op := range c.byCluster.rows[cluster] {
		c.workLocked(op).rows[key] = true
		ops[op] = true
	}
	c.mu.Unlock()
	for op := range ops {
		c.queue.Add(op.String())
	}
}

// indexRowsLocked records which Cluster each of a HelmOp's wanted rows
// is for, so that a report re-overlays only its Cluster's rows, and which
// source it names (syncSources).
func (c *Controller) indexRowsLocked(op types.NamespacedName, rows []*courier.DownstreamCopy) {
	for _, r := range rows {
		key := rowKey(r)
		c.byCluster.set(key, types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.Cluster}, op)
		c.bySource.set(key, ListedKey(r.Namespace, r.Spec.Source.Kind, r.Spec.Source.Name), op)
	}
}

// unindexRowLocked forgets a row that is gone.
func (c *Controller) unindexRowLocked(key string) {
	c.byCluster.remove(key)
	c.bySource.remove(key)
}
