package engine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
)

// waitSynced waits up to Config.SyncWait for client's informers to sync.
func (e *Engine) waitSynced(ctx context.Context, client *downstream.Client) {
	if e.cfg.SyncWait < 0 || client.HasSynced == nil || client.HasSynced() {
		return
	}
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, e.cfg.SyncWait, false, func(context.Context) (bool, error) {
		return client.HasSynced(), nil
	})
}

// createUnread reports whether a copy may be created without reading it
// first. It decides from the row's spec and what was observed downstream,
// never from the row's recorded status: the informer has synced (so it
// holds every copy written for this Cluster) and holds no object of that
// name (inCache: another HelmOp's copy, say), the watch of Fleet's copies
// holds none of that name, the row appeared after the start or a pass over
// the cluster with this client has ended before (a row that existed before
// a start is read by its first pass: the engine cannot know what held its
// name before), no twin Cluster on the same kube-apiserver wants the same
// copy (its copy would be there), and the last live read of the name did
// not find it held by an object Courier may not write (takenNames: such a
// name is read again, to see whether it has gone). Anything else there --
// a copy written before the cluster-hash label, an object created
// meanwhile -- makes the create fail with AlreadyExists, and execute reads
// it then. A replica that does not lead writes nothing, so it always
// reads.
//
// The read saved is one request per new copy: for a new HelmOp at 1,000
// Clusters × 10 copies, 10,000 GETs that each found nothing.
func (e *Engine) createUnread(client *downstream.Client, c desiredCopy, o kindOps, inCache bool) bool {
	return e.delivers(client.Key) && o.synced() && !inCache &&
		(!e.desired.existedAtStart(c.rowKey) || e.clients.passedBefore(client)) &&
		client.MayHaveForeign != nil && !client.MayHaveForeign(c.kind, c.targetNS, c.name) &&
		!e.wantedByTwin(client.Key, client, copyID(c.helmOp, c.kind, c.targetNS, c.name)) &&
		!e.taken.taken(client.Key, c)
}

// judge records what the copy needs given cur, the object of its name read
// live from the cluster: Fleet's copy and objects Courier does not own are
// reported, never written; Courier's own is decided on. taken reports
// whether cur is an object Courier may not write (takenNames).
func (p *plan) judge(cur object, owner copyspec.Owner, what, cluster string) (taken bool) {
	if bd, ok := copyspec.FleetCopy(cur); ok {
		p.out = fleetsCopy(*p, cur, bd, what, cluster)
		return true
	}
	switch copyspec.OwnershipOf(cur, owner) {
	case copyspec.NotManaged:
		p.out = conflict(fmt.Sprintf("%s exists in cluster %s and is not managed by Courier; it is left unchanged", what, cluster))
	case copyspec.OtherOwner:
		p.out = conflict(fmt.Sprintf("%s exists in cluster %s and belongs to another owner (HelmOp %q); it is left unchanged",
			what, cluster, cur.GetAnnotations()[copyspec.AnnotationHelmOp]))
	default:
		p.decide(cur)
		return false
	}
	return true
}

// createFoundExisting handles a create decided without a read (createUnread)
// that found the object there: it is read now and judged as planCopy would
// have, and Courier's own copy is updated or replaced if it differs.
// Nothing was written by the failed create.
func (e *Engine) createFoundExisting(ctx context.Context, client *downstream.Client, id identity, cluster *fleet.Cluster,
	c desiredCopy, p plan, namespaces map[string]bool) outcome {
	what := describe(c.kind, c.targetNS, c.name)
	cur, err := p.ops.get(ctx, c.targetNS, c.name)
	if err != nil {
		return e.writeFailed(cluster, "reading "+what, err)
	}
	owner := copyspec.Owner{UpstreamID: e.cfg.UpstreamID, HelmOp: c.helmOp, Cluster: cluster.Name, Keep: c.keep}
	p.action, p.unread = actionNone, false
	e.taken.observe(client.Key, c, p.judge(cur, owner, what, cluster.Name))
	if p.action == actionNone {
		return p.out
	}
	return e.execute(ctx, client, id, cluster, c, p, namespaces)
}
