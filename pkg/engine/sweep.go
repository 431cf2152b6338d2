package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
)

// sweptKinds are the kinds of the copies the sweep looks at.
var sweptKinds = []string{"Secret", "ConfigMap"}

// sweep deletes copies in this cluster that Courier made for this Cluster
// and that no row wants any more: entries removed from a list, clusters no
// longer targeted, HelmOps deleted (also while Courier was down). It
// deletes only objects with the managed-by label and an owner label that
// matches the HelmOp and upstream they claim, never one written under
// keepResources, and uses Courier's own identity. With remove false (a
// replica that does not lead) it deletes nothing.
//
// It returns what is left of those copies: the kept ones (Kept) and the
// ones not removed (Deleting, with the reason). The list is nil when the
// copies could not be listed.
//
// unlabelled lists a kind's copies without the cluster-hash label, live
// (passReads): the sweep looks for those once per client.
func (e *Engine) sweep(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, copies []desiredCopy, remove bool,
	unlabelled func(ctx context.Context, kind string) ([]object, error)) ([]copycontract.Leftover, error) {
	wanted, denied := wantedCopies(copies)
	left := []copycontract.Leftover{}
	var failed error
	key := cluster.Namespace + "/" + cluster.Name
	legacy := e.clients.needsLegacySweep(key, client)
	keptLegacy := false
	for _, kind := range sweptKinds {
		ops := objectOps(client, client.Kube, kind) // removal uses Courier's own identity
		managed, err := sweptCopies(ctx, ops, kind, legacy, unlabelled)
		if err != nil {
			return nil, err
		}
		for _, obj := range managed {
			claim, ok := copyspec.ClaimedOwner(obj)
			if !ok || claim.UpstreamID != e.cfg.UpstreamID || claim.HelmOp.Namespace != cluster.Namespace || !claim.WrittenFor(cluster.Namespace, cluster.Name) {
				continue
			}
			if _, fleets := copyspec.FleetCopy(obj); fleets {
				continue // Fleet's, whatever else it claims (docs/design.md#fleets-own-copies)
			}
			helmOp := claim.HelmOp
			id := copyID(helmOp, kind, obj.GetNamespace(), obj.GetName())
			if wanted[id] || e.wantedByTwin(key, client, id) {
				continue
			}
			if _, labelled := obj.GetLabels()[copyspec.LabelClusterHash]; !labelled && claim.Keep {
				keptLegacy = true
			}
			what := describe(kind, obj.GetNamespace(), obj.GetName())
			l := copycontract.Leftover{HelmOp: helmOp, Cluster: cluster.Name, Kind: kind, Name: obj.GetName(), TargetNamespace: obj.GetNamespace(),
				Keep: claim.Keep, SyncedResourceVersion: obj.GetAnnotations()[copyspec.AnnotationSourceResourceVersion]}
			deniedRow, isDenied := denied[id]
			switch {
			case claim.Keep && !isDenied:
				l.Phase = courier.CopyPhaseKept
				l.Message = fmt.Sprintf("%s stays in cluster %s: it was written with keepResources and nothing lists it any more; Courier no longer updates it", what, cluster.Name)
			case !remove || failed != nil:
				l.Phase = courier.CopyPhaseDeleting
				l.Message = fmt.Sprintf("%s in cluster %s is no longer wanted; %s removes it", what, cluster.Name, e.writerName())
				if failed != nil {
					l.Message = fmt.Sprintf("%s in cluster %s is no longer wanted and not removed yet: %v", what, cluster.Name, failed)
				}
			default:
				uid := obj.GetUID()
				err := ops.delete(ctx, obj.GetNamespace(), obj.GetName(), &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					// Stop removing for this pass: the cluster refuses or
					// does not answer. The rest wait for the retry.
					failed = fmt.Errorf("removing %s: %w", what, err)
					l.Phase = courier.CopyPhaseDeleting
					l.Message = fmt.Sprintf("removing %s from cluster %s failed: %v", what, cluster.Name, err)
					break
				}
				copiesTotal.WithLabelValues("deleted", "").Inc()
				if claim.Keep {
					e.retracted(ctx, cluster, deniedRow, obj)
					continue
				}
				klog.FromContext(ctx).Info("Removed copy nothing wants any more", "cluster", cluster.Namespace+"/"+cluster.Name,
					"helmop", helmOp.String(), "kind", kind, "object", obj.GetNamespace()+"/"+obj.GetName())
				if e.cfg.Recorder != nil {
					e.cfg.Recorder.Eventf(e.helmOpRef(helmOp), corev1.EventTypeNormal, "Removed", "%s %s removed from %s in cluster %s", kind, obj.GetName(), obj.GetNamespace(), cluster.Name)
				}
				continue
			}
			left = append(left, l)
		}
	}
	if failed == nil && legacy && !keptLegacy {
		e.clients.legacySwept(key, client)
	}
	return left, failed
}

// sweptCopies lists the copies of one kind the sweep looks at: Courier's
// own from the informer and, when legacy, those written before the
// cluster-hash label existed, which are not in the informer's selection
// (found once per client by a live list).
func sweptCopies(ctx context.Context, ops kindOps, kind string, legacy bool,
	unlabelled func(ctx context.Context, kind string) ([]object, error)) ([]object, error) {
	managed, err := ops.listManaged(ctx)
	if err != nil || !legacy {
		return managed, err
	}
	old, err := unlabelled(ctx, kind)
	if err != nil {
		return nil, err
	}
	return append(managed, old...), nil
}

// wantedCopies returns the copy IDs the Cluster's rows want, and the
// Denied rows by copy ID: their copies are wanted by no row, and a kept
// one is removed all the same (a leak is retracted).
func wantedCopies(copies []desiredCopy) (wanted map[string]bool, denied map[string]desiredCopy) {
	wanted, denied = map[string]bool{}, map[string]desiredCopy{}
	for _, c := range copies {
		if c.denied {
			denied[copyID(c.helmOp, c.kind, c.targetNS, c.name)] = c
			continue
		}
		wanted[copyID(c.helmOp, c.kind, c.targetNS, c.name)] = true
	}
	return wanted, denied
}
