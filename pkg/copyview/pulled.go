package copyview

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/copycontract"
	clusterdelivery "github.com/courier-dev/courier/pkg/delivery"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// Pulled Clusters (docs/design.md#pull-delivery): a Cluster whose agent
// annotation names its agent (clusterdelivery.Of) is written by its courier-agent, not by the engine, and its
// rows show what that agent reported:
//
//   - before the agent has reported on a row: Pending, waiting for it,
//     naming the agent and, before its first report, since when the
//     Cluster has been seen pulled;
//   - when it has never reported, MissedIntervals default intervals after
//     that: Unreachable, as a silent agent's rows;
//   - while the agent's heartbeat is fresh: the phase, message, synced
//     resourceVersion and time it reported;
//   - once it has not been heard for three of its report intervals:
//     Unreachable, saying when it was last heard (RFC 3339).
//
// The phases the view computes itself (Invalid, SourceMissing, Denied)
// keep precedence, as over the engine's record (see rowstatus.Compose). A report change
// re-overlays only its Cluster's rows, and a timer at each Cluster's
// deadline does the same when the heartbeat runs out: the cost of both is
// that Cluster's rows, never every row.

// Reports are what the agents of pulled Clusters reported
// (clusterstatus.Store).
type Reports interface {
	// Report returns the last report of a Cluster's agent; it must not be
	// modified.
	Report(cluster types.NamespacedName) (*clusterstatus.Report, bool)
	// Leftovers returns one owner's leftover copies that the deliverers of
	// pushed Clusters published, at a cost of that owner's leftovers.
	Leftovers(owner types.NamespacedName) []copycontract.Leftover
	// HasSynced reports whether the reports have been read: until then a
	// pulled Cluster's rows would show Pending after a restart.
	HasSynced() bool
}

// awaitedAgent is a pulled Cluster whose agent has not reported yet:
// its agent user, and since when the view has seen it pulled.
type awaitedAgent struct {
	user  string
	since time.Time
}

// deadline is the pending re-evaluation of one pulled Cluster's rows.
type deadline struct {
	at    time.Time
	timer clock.Timer
}

// deliveryOf returns who delivers a row's Cluster, from the Cluster alone
// (clusterdelivery.Of), and whether the Cluster is known.
func (c *Controller) deliveryOf(namespace, cluster string) (clusterdelivery.Answer, bool) {
	cl, err := c.inputs.Clusters.Clusters(namespace).Get(cluster)
	if err != nil {
		return clusterdelivery.Answer{}, false
	}
	return clusterdelivery.Of(cl), true
}

// delivery returns what a computed row's deliverer says of it, for
// rowstatus.Compose: its agent's report for a pulled Cluster's row; why
// nobody delivers for the row of a Cluster nobody does; for a pushed
// one, the engine's record when this replica delivers to the Cluster and
// has one, else what the deliverer published. So a replica that just
// gained a Cluster shows the previous deliverer's last word until its own
// first pass records something, and a replica that does not deliver to a
// Cluster never shows its own guess. Without sharding a follower that
// still observes shows its own record only for rows the leader has not
// published.
func (c *Controller) delivery(r *courier.DownstreamCopy) rowstatus.Delivery {
	if a, known := c.deliveryOf(r.Namespace, r.Spec.Cluster); a.Pulled() {
		return c.reported(r, a.Agent)
	} else if known && !a.Pushed() {
		return rowstatus.Delivery{Nobody: a.Reason}
	}
	if c.engine == nil {
		return rowstatus.Delivery{}
	}
	own, recorded := c.engine.Status(rowKey(r))
	if recorded && c.engine.Delivers(r.Namespace+"/"+r.Spec.Cluster) {
		return rowstatus.Delivery{Record: &own}
	}
	if st, ok := c.published(r); ok {
		return rowstatus.Delivery{Record: &st, FromReplica: true}
	}
	if recorded {
		return rowstatus.Delivery{Record: &own} // a follower observing, without sharding
	}
	return rowstatus.Delivery{FromReplica: !c.engine.Delivers(r.Namespace + "/" + r.Spec.Cluster)}
}

// published returns what the deliverer of a pushed Cluster's row published
// for it (docs/design.md#scale-out): the replica holding the Cluster's bucket,
// the leader without sharding, or this replica's previous process.
func (c *Controller) published(r *courier.DownstreamCopy) (copycontract.Status, bool) {
	if c.inputs.Reports == nil {
		return copycontract.Status{}, false
	}
	rep, ok := c.inputs.Reports.Report(types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.Cluster})
	if !ok {
		return copycontract.Status{}, false
	}
	e, ok := rep.Rows[r.Name]
	if !ok {
		return copycontract.Status{}, false
	}
	return entryStatus(e), true
}

// entryStatus is the record an entry of a Cluster's status object holds.
func entryStatus(e clusterstatus.Entry) copycontract.Status {
	st := copycontract.Status{Phase: e.Phase, Message: e.Message, SyncedResourceVersion: e.SyncedResourceVersion}
	if e.LastSyncTime != nil {
		t := *e.LastSyncTime
		st.LastSyncTime = &t
	}
	return st
}

// reported is a pulled Cluster's row's delivery from its agent's report.
// While the heartbeat is fresh it makes sure the Cluster's rows are
// looked at again when it runs out.
func (c *Controller) reported(r *courier.DownstreamCopy, user string) rowstatus.Delivery {
	cluster := types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.Cluster}
	agent := &rowstatus.Agent{User: user, Cluster: cluster}
	var rep *clusterstatus.Report
	if c.inputs.Reports != nil {
		rep, _ = c.inputs.Reports.Report(cluster)
	}
	if rep == nil || rep.Heartbeat.LastHeard.IsZero() {
		agent.Since = c.pulledSince(cluster, user)
		due := agent.Since.Add(rowstatus.MissedIntervals * rowstatus.DefaultInterval)
		if agent.Overdue = !c.clock.Now().Before(due); !agent.Overdue {
			c.scheduleDeadline(cluster, due)
		}
		return rowstatus.Delivery{Agent: agent}
	}
	c.forgetPulled(cluster)
	agent.LastHeard, agent.Interval = rep.Heartbeat.LastHeard.Time, rep.Heartbeat.Interval.Duration
	d := rowstatus.Delivery{Agent: agent}
	if e, ok := rep.Rows[r.Name]; ok {
		st := entryStatus(e)
		d.Record = &st
	}
	due := rep.Deadline()
	if agent.Overdue = !c.clock.Now().Before(due); !agent.Overdue {
		c.scheduleDeadline(cluster, due)
	}
	return d
}

// composeRow gives a computed row, whose status is its base, the status
// rowstatus.Compose makes of it with what its deliverer says, and reports whether
// its Cluster is pulled (its deliverer is an agent).
func (c *Controller) composeRow(r *courier.DownstreamCopy) (pulled bool) {
	d := c.delivery(r)
	r.Status = rowstatus.Compose(r.Status, r.Spec.Cluster, d)
	return d.Agent != nil
}

// pulledSince returns when the view first saw a pulled Cluster with this
// agent user that has not reported yet: what its rows wait for the
// agent's first report since, and what their deadline counts from. It is
// this replica's memory: a restart, or another agent user, starts again.
func (c *Controller) pulledSince(cluster types.NamespacedName, user string) time.Time {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if a, ok := c.awaiting[cluster]; ok && a.user == user {
		return a.since
	}
	now := c.clock.Now()
	c.awaiting[cluster] = awaitedAgent{user: user, since: now}
	return now
}

// forgetPulled forgets when a Cluster was first seen pulled: its agent
// has reported, or the Cluster is gone or changed its agent user.
func (c *Controller) forgetPulled(cluster types.NamespacedName) {
	c.dmu.Lock()
	delete(c.awaiting, cluster)
	c.dmu.Unlock()
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
