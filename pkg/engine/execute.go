package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
)

// execute carries out a plan with the group's identity.
func (e *Engine) execute(ctx context.Context, client *downstream.Client, id identity, cluster *fleet.Cluster, c desiredCopy, p plan, namespaces map[string]bool) outcome {
	what := describe(c.kind, c.targetNS, c.name)
	p.ops = objectOps(client, id.writer, c.kind)
	switch p.action {
	case actionCreate:
		if !namespaces[c.targetNS] {
			if o := e.ensureNamespace(ctx, client, id, cluster, c.targetNS); o != nil {
				return *o
			}
			namespaces[c.targetNS] = true
		}
		e.writing(cluster, c)
		rv, err := p.ops.create(ctx, p.want)
		e.wrote(cluster, c, rv)
		if apierrors.IsAlreadyExists(err) && p.unread {
			return e.createFoundExisting(ctx, client, id, cluster, c, p, namespaces)
		}
		if err != nil {
			return e.writeFailed(cluster, fmt.Sprintf("creating %s as %s", what, id.user()), err)
		}
		return e.written(client, c, p.srcRV, rv, "Created")
	case actionRecreate:
		uid := p.cur.GetUID()
		if err := p.ops.delete(ctx, c.targetNS, c.name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return e.writeFailed(cluster, fmt.Sprintf("replacing immutable %s as %s", what, id.user()), err)
		}
		e.writing(cluster, c)
		rv, err := p.ops.create(ctx, p.want)
		e.wrote(cluster, c, rv)
		if err != nil {
			return e.writeFailed(cluster, fmt.Sprintf("replacing immutable %s as %s", what, id.user()), err)
		}
		return e.written(client, c, p.srcRV, rv, "Replaced")
	case actionUpdate:
		p.want.SetResourceVersion(p.cur.GetResourceVersion())
		e.writing(cluster, c)
		rv, err := p.ops.update(ctx, p.want)
		defer func() { e.wrote(cluster, c, rv) }()
		if apierrors.IsConflict(err) {
			// The cached copy was stale: read it live and try once more.
			var cur object
			if cur, err = p.ops.get(ctx, c.targetNS, c.name); err == nil {
				owner := copyspec.Owner{UpstreamID: e.cfg.UpstreamID, HelmOp: c.helmOp, Cluster: cluster.Name}
				if _, fleets := copyspec.FleetCopy(cur); fleets || copyspec.OwnershipOf(cur, owner) != copyspec.OwnedBy {
					e.taken.observe(client.Key, c, true)
					return conflict(fmt.Sprintf("%s in cluster %s was replaced by an object Courier does not own; it is left unchanged", what, cluster.Name))
				}
				copyspec.AdoptWriter(p.want, cur)
				if p.ops.upToDate(cur, p.want) {
					return outcome{status: synced(p.srcRV, nil)}
				}
				p.want.SetResourceVersion(cur.GetResourceVersion())
				rv, err = p.ops.update(ctx, p.want)
			}
		}
		if err != nil {
			return e.writeFailed(cluster, fmt.Sprintf("updating %s as %s", what, id.user()), err)
		}
		return e.written(client, c, p.srcRV, rv, "Updated")
	}
	return p.out
}

func synced(rv string, at *metav1.Time) copycontract.Status {
	return copycontract.Status{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: rv, LastSyncTime: at,
		Message: "the copy matches its source"}
}

// written is the outcome of a write of the copy of row c, made from the
// source at srcRV, that the server stored at copyRV. The copy is current
// as written: the next pass that finds it at copyRV need not judge it
// again (currentCopies), which after a change of every source is most of
// the next pass.
func (e *Engine) written(client *downstream.Client, c desiredCopy, srcRV, copyRV, how string) outcome {
	copiesTotal.WithLabelValues("written", how).Inc()
	if srcRV == c.sourceRV {
		e.current.remember(client, c, copyRV)
	}
	if at, ok := e.desired.takeObservedAt(c.rowKey); ok {
		propagationSeconds.Observe(e.now().Sub(at).Seconds())
	}
	st := synced(srcRV, nowTime(e.now()))
	return outcome{status: st, wrote: true, reason: how, eventOK: true}
}

// writeFailed turns a downstream error into a row status.
func (e *Engine) writeFailed(cluster *fleet.Cluster, doing string, err error) outcome {
	switch {
	case unreachable(err):
		copiesTotal.WithLabelValues("failed", "Unreachable").Inc()
		return outcome{fatal: err, reason: "Unreachable", status: copycontract.Status{Phase: courier.CopyPhaseUnreachable,
			Message: fmt.Sprintf("cluster %s is unreachable: %s: %v", cluster.Name, doing, err)}}
	case errors.Is(err, errHandedOver):
		// Not this replica's to retry: if its bucket comes back,
		// BucketsChanged queues the Cluster with its backoff reset.
		return outcome{status: copycontract.Status{Phase: courier.CopyPhasePending,
			Message: fmt.Sprintf("%s in cluster %s: %v", doing, cluster.Name, err)}}
	case apierrors.IsForbidden(err):
		copiesTotal.WithLabelValues("failed", "Forbidden").Inc()
		return outcome{retry: true, reason: "Forbidden", eventOK: true, status: copycontract.Status{Phase: courier.CopyPhaseForbidden,
			Message: fmt.Sprintf("%s in cluster %s: %v", doing, cluster.Name, err)}}
	default:
		copiesTotal.WithLabelValues("failed", "Error").Inc()
		return outcome{retry: true, reason: "CopyFailed", eventOK: true, status: copycontract.Status{Phase: courier.CopyPhasePending,
			Message: fmt.Sprintf("%s in cluster %s failed: %v", doing, cluster.Name, err)}}
	}
}

// event records an Event on the HelmOp for a write or a new problem.
func (e *Engine) event(c desiredCopy, cluster *fleet.Cluster, out outcome) {
	if e.cfg.Recorder == nil || !out.eventOK || !e.delivers(cluster.Namespace+"/"+cluster.Name) {
		// Every replica observes conflicts; only the one delivering to the
		// Cluster reports them, so each appears once.
		return
	}
	if out.wrote {
		if !e.copied.allow(c.helmOp, e.now()) {
			return // client-go's spam filter would drop it (eventBudget)
		}
		e.cfg.Recorder.Eventf(e.helmOpRef(c.helmOp), corev1.EventTypeNormal, "Copied", "%s %s copied to %s/%s in cluster %s", c.kind, c.name, c.targetNS, c.name, cluster.Name)
		return
	}
	e.cfg.Recorder.Event(e.helmOpRef(c.helmOp), corev1.EventTypeWarning, out.reason, out.status.Message)
}
