package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/downstream"
)

// outcome is what syncing one copy did.
type outcome struct {
	status  copycontract.Status
	wrote   bool
	reason  string // metric and Event reason
	fatal   error  // stop this cluster's pass (unreachable) and retry later
	retry   bool   // the row did not converge; retry the cluster with backoff
	eventOK bool
}

// reconcileCluster brings one cluster's copies in line with the desired
// rows, then removes the copies nothing wants any more. Copies are handled
// in groups of the same HelmOp and ServiceAccount: each group's copies are
// planned (read-only), its permissions are checked as its ServiceAccount,
// and only then is anything written, so a forbidden group writes nothing.
//
// When all that happened since the last pass is new source versions of
// some rows (passScopes.take), and that pass ended with the same client, the
// pass covers just those rows and does not sweep (scope.go). What the
// pass recorded is published when this replica delivers to the Cluster
// (publish.go): once the engine is idle (publishqueue.go), or at once when
// the pass found the Cluster down where the pass before found it up, or
// the other way round (reachability.go).
func (e *Engine) reconcileCluster(ctx context.Context, key string) error {
	defer e.passes.start()()
	err := e.passCluster(ctx, key)
	if e.reach.set(key, passDown(err)) {
		e.toPublish.markNow(key)
	} else {
		e.toPublish.mark(key, e.now())
	}
	return err
}

// passCluster is one pass of reconcileCluster. With sharding, a Cluster
// this replica does not deliver to gets no pass at all: what it held for
// the Cluster is dropped (leave), and its rows show what the deliverer
// published.
func (e *Engine) passCluster(ctx context.Context, key string) error {
	if e.cfg.Shards != nil && !e.delivers(key) {
		e.leave(key)
		return nil
	}
	rows := e.scopes.take(key) // nil: every row, and the sweep
	ns, name := copycontract.SplitKey(key)
	cluster, err := e.cfg.Clusters.Clusters(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// The Cluster is gone: its rows are gone with it, and Courier can no
		// longer reach it to remove copies.
		e.forgetCluster(key)
		if e.statuses.setLeftovers(key, nil) {
			e.notify()
		}
		return nil
	} else if err != nil {
		return err
	}
	if !pushed(cluster) {
		e.leave(key) // its agent writes there, or nobody does (docs/design.md#pull-delivery)
		return nil
	}
	copies := e.desired.copiesFor(key)
	ctx = e.withCluster(ctx, key)

	client, err := e.cfg.Downstream.Get(ctx, cluster)
	if err != nil {
		e.markAll(copies, courier.CopyPhaseUnreachable, err.Error())
		return errNoClient{err}
	}
	whole := rows == nil || !e.clients.passedBefore(client)
	if !whole {
		copies = onlyRows(copies, rows)
	}
	passesTotal.WithLabelValues(passKind(whole)).Inc()
	e.clients.setServer(key, client)
	reads := e.reads(ctx, client, key, copies) // before the wait: the first pass's reads overlap it
	e.waitSynced(ctx, client)

	changed, retryErr, fatal := e.syncCopies(ctx, client, cluster, copies, reads)
	switch {
	case fatal != nil:
		retryErr = fatal
	case e.draining.Load():
		retryErr = nil // what is left waits for the next process or leader
	case whole:
		var swept bool
		swept, retryErr = e.endWholePass(ctx, client, cluster, copies, reads, retryErr)
		changed = changed || swept
	}
	if changed {
		e.notify()
	}
	return retryErr
}

// endWholePass ends a whole pass whose copies were all synced (retryErr
// names one that did not converge): it forgets what no row names any
// more, sweeps, and records what the sweep left. changed reports whether
// the leftovers changed.
func (e *Engine) endWholePass(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, copies []desiredCopy,
	reads passReads, retryErr error) (changed bool, _ error) {
	key := cluster.Namespace + "/" + cluster.Name
	e.current.retain(key, copies)
	e.taken.retain(key, copies)
	// Only the replica delivering to the Cluster removes copies; the others
	// report them Deleting.
	left, err := e.sweep(ctx, client, cluster, copies, e.delivers(key), reads.unlabelled)
	if err != nil {
		if unreachable(err) {
			clusterReachable.WithLabelValues(key).Set(0)
		}
		retryErr = err
	} else {
		clusterReachable.WithLabelValues(key).Set(1)
	}
	if left != nil || err == nil {
		changed = e.statuses.setLeftovers(key, left)
	}
	if err == nil && e.noteDenied(ctx, client, cluster, copies) {
		changed = true
	}
	e.clients.passEnded(client)
	if retryErr != nil {
		klog.FromContext(ctx).V(2).Info("Cluster has copies that did not converge", "cluster", key, "err", retryErr)
	}
	return changed, retryErr
}

// syncCopies syncs copies group by group and records each copy's outcome.
// changed reports whether a row's status changed; retryErr names a row that
// did not converge; fatal stops the pass (the cluster does not answer: the
// rows not reached are marked Unreachable, and the caller notifies).
// Shutting down, it stops between groups: the groups written are whole,
// the rest wait for the next process or leader.
func (e *Engine) syncCopies(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, copies []desiredCopy,
	reads passReads) (changed bool, retryErr, fatal error) {
	key := cluster.Namespace + "/" + cluster.Name
	logger := klog.FromContext(ctx).WithValues("cluster", key)
	namespaces := map[string]bool{} // destination namespace -> exists
	handled := map[string]bool{}
	for _, group := range groupCopies(copies) {
		if e.draining.Load() {
			return changed, retryErr, nil
		}
		out, fatal := e.syncGroup(ctx, client, cluster, group, reads.fallback, namespaces)
		fatalMsg := ""
		for i, c := range group {
			if out[i].status.Phase == "" {
				continue // not reached: the cluster failed earlier in the group
			}
			handled[c.rowKey] = true
			if out[i].fatal != nil {
				fatalMsg = out[i].status.Message
			}
			if e.record(c.rowKey, out[i].status) {
				changed = true
				e.event(c, cluster, out[i])
				logOutcome(logger, c, out[i])
			}
			if out[i].retry && retryErr == nil {
				retryErr = fmt.Errorf("%s: %s", c.rowKey, out[i].status.Message)
			}
		}
		if fatal != nil {
			if fatalMsg == "" {
				fatalMsg = fmt.Sprintf("cluster %s is unreachable: %v", cluster.Name, fatal)
			}
			clusterReachable.WithLabelValues(key).Set(0)
			e.markRest(copies, handled, fatalMsg)
			return true, retryErr, fatal
		}
	}
	return changed, retryErr, nil
}

// passKind is the scope label of courier_cluster_passes_total.
func passKind(whole bool) string {
	if whole {
		return "whole"
	}
	return "sources"
}

// logOutcome logs a copy whose status changed, with the HelmOp, the
// cluster (in logger) and the object: a write at --v=2, a problem at
// --v=1. Messages name objects and paths, never data.
func logOutcome(logger klog.Logger, c desiredCopy, out outcome) {
	kv := func() []any {
		return []any{"helmop", c.helmOp.String(), "kind", c.kind, "object", c.targetNS + "/" + c.name}
	}
	switch {
	case out.wrote:
		// Checked first: a pass writes a copy per change, and the key
		// values are not built for a level that is off.
		if l := logger.V(2); l.Enabled() {
			l.Info("Copied", append(kv(), "how", out.reason)...)
		}
	case out.status.Phase != courier.CopyPhaseSynced:
		logger.V(1).Info("Copy not synced", append(kv(), "phase", out.status.Phase, "message", out.status.Message)...)
	}
}

// groupCopies returns the copyable rows grouped by HelmOp and
// ServiceAccount, in a stable order.
//
// A group's copies almost always come one after another (copiesFor sorts
// by row key, which starts with the HelmOp), and then the groups are
// parts of copies, with nothing copied: a pass runs this for every
// change, and building the groups by appending copies one by one was a
// few kilobytes of garbage per pass. Otherwise they are built by key.
func groupCopies(copies []desiredCopy) [][]desiredCopy {
	if groups, ok := contiguousGroups(copies); ok {
		return groups
	}
	var groups [][]desiredCopy
	index := map[groupKey]int{}
	for _, c := range copies {
		if !c.copyable {
			continue
		}
		i, ok := index[c.groupKey()]
		if !ok {
			i = len(groups)
			index[c.groupKey()] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// contiguousGroups returns the groups as parts of copies (capped, so an
// append to one never writes into the next) when every copy is copyable
// and no group's copies are split by another's; ok is false otherwise.
func contiguousGroups(copies []desiredCopy) (groups [][]desiredCopy, ok bool) {
	start := 0
	for i := range copies {
		if !copies[i].copyable {
			return nil, false
		}
		if i+1 < len(copies) && copies[i+1].groupKey() == copies[start].groupKey() {
			continue
		}
		groups = append(groups, copies[start:i+1:i+1])
		start = i + 1
	}
	if len(groups) > 1 {
		seen := make(map[groupKey]bool, len(groups))
		for _, g := range groups {
			if seen[g[0].groupKey()] {
				return nil, false // a group split in two
			}
			seen[g[0].groupKey()] = true
		}
	}
	return groups, true
}

// groupKey is what the copies of one group share.
type groupKey struct {
	helmOp         types.NamespacedName
	serviceAccount string
}

func (c desiredCopy) groupKey() groupKey { return groupKey{c.helmOp, c.serviceAccount} }

// markAll records the same phase for every copyable row in copies.
func (e *Engine) markAll(copies []desiredCopy, phase courier.CopyPhase, msg string) {
	changed := false
	for _, c := range copies {
		if c.copyable && e.record(c.rowKey, copycontract.Status{Phase: phase, Message: msg}) {
			changed = true
		}
	}
	if changed {
		e.notify()
	}
}

// markRest marks Unreachable the copyable rows a failed pass did not reach;
// rows it handled (a copy written before the cluster stopped answering,
// say) keep what the pass recorded.
func (e *Engine) markRest(copies []desiredCopy, handled map[string]bool, msg string) {
	for _, c := range copies {
		if c.copyable && !handled[c.rowKey] {
			e.record(c.rowKey, copycontract.Status{Phase: courier.CopyPhaseUnreachable, Message: msg})
		}
	}
}

func copyID(helmOp types.NamespacedName, kind, ns, name string) string {
	return helmOp.String() + "|" + strings.ToLower(kind) + "|" + ns + "/" + name
}

// unreachable reports whether err means the cluster could not be reached,
// as opposed to the cluster refusing the request. A 401 counts as
// unreachable: the kubeconfig's credentials are rejected, so no request to
// that cluster can succeed until they change.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr), utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.Is(err, context.DeadlineExceeded), apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err),
		apierrors.IsUnauthorized(err):
		return true
	}
	return false
}
