package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/copyview"
	"github.com/courier-dev/courier/pkg/downstream"
)

// outcome is what syncing one copy did.
type outcome struct {
	status  copyview.EngineStatus
	wrote   bool
	reason  string // metric and Event reason
	fatal   error  // stop this cluster's pass (unreachable) and retry later
	retry   bool   // the row did not converge; retry the cluster with backoff
	eventOK bool
}

// reconcileCluster brings one cluster's copies in line with the desired
// rows, then removes the copies nothing wants any more.
func (e *Engine) reconcileCluster(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	cluster, err := e.cfg.Clusters.Clusters(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// The Cluster is gone: its rows are gone with it, and Courier can no
		// longer reach it to remove copies.
		e.cfg.Downstream.Forget(key)
		clusterReachable.DeleteLabelValues(key)
		return nil
	} else if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("cluster", key)
	copies := e.copiesFor(key)

	client, err := e.cfg.Downstream.Get(ctx, cluster)
	if err != nil {
		e.markAll(copies, courier.CopyPhaseUnreachable, err.Error())
		return err
	}

	changed := false
	var retryErr error
	for i, c := range copies {
		if !c.copyable {
			continue
		}
		out := e.syncCopy(ctx, client, cluster, c)
		if e.record(c.rowKey, out.status) {
			changed = true
			e.event(c, cluster, out)
		}
		if out.fatal != nil {
			clusterReachable.WithLabelValues(key).Set(0)
			e.markAll(copies[i+1:], courier.CopyPhaseUnreachable, out.status.Message)
			e.cfg.OnStatusChange()
			return out.fatal
		}
		if out.retry && retryErr == nil {
			retryErr = fmt.Errorf("%s: %s", c.rowKey, out.status.Message)
		}
	}
	if err := e.sweep(ctx, client, cluster, copies); err != nil {
		if unreachable(err) {
			clusterReachable.WithLabelValues(key).Set(0)
		}
		retryErr = err
	} else {
		clusterReachable.WithLabelValues(key).Set(1)
	}
	if changed {
		e.cfg.OnStatusChange()
	}
	if retryErr != nil {
		logger.V(2).Info("Cluster has copies that did not converge", "err", retryErr)
	}
	return retryErr
}

// markAll records the same phase for every copyable row in copies.
func (e *Engine) markAll(copies []desiredCopy, phase courier.CopyPhase, msg string) {
	changed := false
	for _, c := range copies {
		if c.copyable && e.record(c.rowKey, copyview.EngineStatus{Phase: phase, Message: msg}) {
			changed = true
		}
	}
	if changed {
		e.cfg.OnStatusChange()
	}
}

// syncCopy makes one downstream copy match its source.
func (e *Engine) syncCopy(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, c desiredCopy) outcome {
	what := describe(c.kind, c.targetNS, c.name)
	src, err := e.sources.get(ctx, sourceKey{c.kind, c.helmOp.Namespace, c.name}, c.sourceRV)
	if apierrors.IsNotFound(err) {
		return outcome{status: copyview.EngineStatus{Phase: courier.CopyPhaseSourceMissing,
			Message: fmt.Sprintf("%s %s/%s does not exist", c.kind, c.helmOp.Namespace, c.name)}}
	} else if err != nil {
		return outcome{retry: true, reason: "SourceReadFailed", status: copyview.EngineStatus{Phase: courier.CopyPhasePending,
			Message: fmt.Sprintf("reading %s %s/%s upstream: %v", c.kind, c.helmOp.Namespace, c.name, err)}}
	}
	owner := copyspec.Owner{UpstreamID: e.cfg.UpstreamID, HelmOp: c.helmOp, Cluster: cluster.Name, Keep: c.keep}
	srcMeta, _ := metaOf(src)
	srcRV := srcMeta.GetResourceVersion()
	ops := objectOps(client, c.kind)
	want := ops.desired(src, c.targetNS, owner)

	// The informer's copy answers the common case (already current) without
	// a request; anything else is confirmed with a live read before writing.
	if cur, ok := ops.cached(c.targetNS, c.name); ok && copyspec.OwnershipOf(cur, owner) == copyspec.OwnedBy && ops.upToDate(cur, want) {
		copiesTotal.WithLabelValues("current", "").Inc()
		return outcome{status: synced(srcRV, nil)}
	}
	cur, err := ops.get(ctx, c.targetNS, c.name)
	switch {
	case apierrors.IsNotFound(err):
		if err := ensureNamespace(ctx, client, c.targetNS); err != nil {
			return e.writeFailed(c, cluster, fmt.Sprintf("creating namespace %s", c.targetNS), err)
		}
		if err := ops.create(ctx, want); err != nil {
			return e.writeFailed(c, cluster, "creating "+what, err)
		}
		return e.written(c, srcRV, "Created")
	case err != nil:
		return e.writeFailed(c, cluster, "reading "+what, err)
	}

	switch copyspec.OwnershipOf(cur, owner) {
	case copyspec.NotManaged:
		copiesTotal.WithLabelValues("failed", "Conflict").Inc()
		return outcome{reason: "Conflict", eventOK: true, status: copyview.EngineStatus{Phase: courier.CopyPhaseConflict,
			Message: fmt.Sprintf("%s exists in cluster %s and is not managed by Courier; it is left unchanged", what, cluster.Name)}}
	case copyspec.OtherOwner:
		claimed := cur.GetAnnotations()[copyspec.AnnotationHelmOp]
		copiesTotal.WithLabelValues("failed", "Conflict").Inc()
		return outcome{reason: "Conflict", eventOK: true, status: copyview.EngineStatus{Phase: courier.CopyPhaseConflict,
			Message: fmt.Sprintf("%s exists in cluster %s and belongs to another owner (HelmOp %q); it is left unchanged", what, cluster.Name, claimed)}}
	}
	if ops.upToDate(cur, want) {
		copiesTotal.WithLabelValues("current", "").Inc()
		return outcome{status: synced(srcRV, nil)}
	}
	if ops.needsRecreate(cur, want) {
		uid := cur.GetUID()
		if err := ops.delete(ctx, c.targetNS, c.name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return e.writeFailed(c, cluster, "replacing immutable "+what, err)
		}
		if err := ops.create(ctx, want); err != nil {
			return e.writeFailed(c, cluster, "replacing immutable "+what, err)
		}
		return e.written(c, srcRV, "Replaced")
	}
	want.SetResourceVersion(cur.GetResourceVersion())
	if err := ops.update(ctx, want); err != nil {
		return e.writeFailed(c, cluster, "updating "+what, err)
	}
	return e.written(c, srcRV, "Updated")
}

func synced(rv string, at *metav1.Time) copyview.EngineStatus {
	return copyview.EngineStatus{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: rv, LastSyncTime: at,
		Message: "the copy matches its source"}
}

func (e *Engine) written(c desiredCopy, srcRV, how string) outcome {
	copiesTotal.WithLabelValues("written", how).Inc()
	e.mu.Lock()
	if at, ok := e.observedAt[c.rowKey]; ok {
		propagationSeconds.Observe(e.now().Sub(at).Seconds())
		delete(e.observedAt, c.rowKey)
	}
	e.mu.Unlock()
	st := synced(srcRV, nowTime(e.now()))
	return outcome{status: st, wrote: true, reason: how, eventOK: true}
}

// writeFailed turns a downstream error into a row status.
func (e *Engine) writeFailed(c desiredCopy, cluster *fleet.Cluster, doing string, err error) outcome {
	switch {
	case unreachable(err):
		copiesTotal.WithLabelValues("failed", "Unreachable").Inc()
		return outcome{fatal: err, reason: "Unreachable", status: copyview.EngineStatus{Phase: courier.CopyPhaseUnreachable,
			Message: fmt.Sprintf("cluster %s is unreachable: %s: %v", cluster.Name, doing, err)}}
	case apierrors.IsForbidden(err):
		copiesTotal.WithLabelValues("failed", "Forbidden").Inc()
		return outcome{retry: true, reason: "Forbidden", eventOK: true, status: copyview.EngineStatus{Phase: courier.CopyPhaseForbidden,
			Message: fmt.Sprintf("%s in cluster %s: %v", doing, cluster.Name, err)}}
	default:
		copiesTotal.WithLabelValues("failed", "Error").Inc()
		return outcome{retry: true, reason: "CopyFailed", eventOK: true, status: copyview.EngineStatus{Phase: courier.CopyPhasePending,
			Message: fmt.Sprintf("%s in cluster %s failed: %v", doing, cluster.Name, err)}}
	}
}

// event records an Event on the HelmOp for a write or a new problem.
func (e *Engine) event(c desiredCopy, cluster *fleet.Cluster, out outcome) {
	if e.cfg.Recorder == nil || !out.eventOK {
		return
	}
	ref := e.helmOpRef(c.helmOp)
	if out.wrote {
		e.cfg.Recorder.Eventf(ref, corev1.EventTypeNormal, "Copied", "%s %s copied to %s/%s in cluster %s", c.kind, c.name, c.targetNS, c.name, cluster.Name)
		return
	}
	e.cfg.Recorder.Event(ref, corev1.EventTypeWarning, out.reason, out.status.Message)
}

// sweep deletes copies in this cluster that Courier made for this Cluster
// and that no row wants any more: entries removed from a list, clusters no
// longer targeted, HelmOps deleted (also while Courier was down). It
// deletes only objects with the managed-by label and an owner label that
// matches the HelmOp and upstream they claim, never one written under
// keepResources, and uses Courier's own identity.
func (e *Engine) sweep(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, copies []desiredCopy) error {
	wanted := map[string]bool{}
	for _, c := range copies {
		wanted[copyID(c.helmOp, c.kind, c.targetNS, c.name)] = true
	}
	for _, kind := range []string{"Secret", "ConfigMap"} {
		ops := objectOps(client, kind)
		managed, err := ops.listManaged(ctx)
		if err != nil {
			return err
		}
		for _, obj := range managed {
			claim, ok := copyspec.ClaimedOwner(obj)
			if !ok || claim.Keep || claim.UpstreamID != e.cfg.UpstreamID || claim.HelmOp.Namespace != cluster.Namespace || claim.Cluster != cluster.Name {
				continue
			}
			helmOp := claim.HelmOp
			if wanted[copyID(helmOp, kind, obj.GetNamespace(), obj.GetName())] {
				continue
			}
			uid := obj.GetUID()
			err := ops.delete(ctx, obj.GetNamespace(), obj.GetName(), &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("removing %s: %w", describe(kind, obj.GetNamespace(), obj.GetName()), err)
			}
			copiesTotal.WithLabelValues("deleted", "").Inc()
			klog.FromContext(ctx).Info("Removed copy nothing wants any more", "cluster", cluster.Namespace+"/"+cluster.Name,
				"helmop", helmOp.String(), "kind", kind, "object", obj.GetNamespace()+"/"+obj.GetName())
			if e.cfg.Recorder != nil {
				e.cfg.Recorder.Eventf(e.helmOpRef(helmOp), corev1.EventTypeNormal, "Removed", "%s %s removed from %s in cluster %s", kind, obj.GetName(), obj.GetNamespace(), cluster.Name)
			}
		}
	}
	return nil
}

func copyID(helmOp types.NamespacedName, kind, ns, name string) string {
	return helmOp.String() + "|" + strings.ToLower(kind) + "|" + ns + "/" + name
}

// ensureNamespace creates the destination namespace if it is missing.
func ensureNamespace(ctx context.Context, client *downstream.Client, ns string) error {
	_, err := client.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	_, err = client.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// unreachable reports whether err means the cluster could not be reached,
// as opposed to the cluster refusing the request.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr), utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.Is(err, context.DeadlineExceeded), apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err):
		return true
	}
	return false
}
