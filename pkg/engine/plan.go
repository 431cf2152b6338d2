package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
	"github.com/courier-dev/courier/pkg/exportpolicy"
)

// action is what one copy needs.
type action int

const (
	actionNone     action = iota // current, or nothing can be done (status says why)
	actionCreate                 // missing downstream
	actionUpdate                 // ours, differs
	actionRecreate               // ours, immutable or type changed: delete and create
)

// plan is one copy's read-only assessment.
type plan struct {
	action action
	want   object
	cur    object
	ops    kindOps
	srcRV  string
	out    outcome // final outcome when action is actionNone
	// unread is set on an actionCreate decided without reading the object
	// live (see createUnread): the create may find it exists after all.
	unread bool
}

// planCopy reads the source and the downstream object and decides what the
// copy needs, without writing.
func (e *Engine) planCopy(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, c desiredCopy) plan {
	// Planning only reads; execute writes through the group's identity.
	ops := objectOps(client, client.Kube, c.kind)
	// The informer holds Courier's own copies. A copy found current at this
	// very version for this very row needs nothing more (currentCopies).
	cached, inCache := ops.cached(c.targetNS, c.name)
	if inCache && e.current.holds(client, c, cached.GetResourceVersion()) {
		return plan{ops: ops, cur: cached, srcRV: c.sourceRV, out: foundCurrent(c.sourceRV)}
	}
	what := describe(c.kind, c.targetNS, c.name)
	src, err := e.sources.get(ctx, sourceKey{c.kind, c.helmOp.Namespace, c.name}, c.sourceRV, c.rowKey)
	if apierrors.IsNotFound(err) {
		// Only the view decides that a source is missing (its row's spec
		// then has no resourceVersion and reaches no engine): until it
		// sees the delete, the engine says what it found and decides
		// nothing, keeping the copy made before.
		return plan{out: outcome{status: copycontract.Status{Phase: courier.CopyPhasePending,
			Message: fmt.Sprintf("source %s %s/%s not found upstream; waiting for the view", c.kind, c.helmOp.Namespace, c.name)}}}
	} else if v, denied := exportpolicy.IsDenied(err); denied {
		// The read refused a source the view had not found denied yet (an
		// annotation added a moment ago): nothing is written, and the view
		// takes the row away from the engine when it catches up.
		return plan{out: outcome{retry: true, reason: "ExportDenied", status: copycontract.Status{Phase: courier.CopyPhaseDenied, Message: v.Message}}}
	} else if err != nil {
		return plan{out: outcome{retry: true, reason: "SourceReadFailed", status: copycontract.Status{Phase: courier.CopyPhasePending,
			Message: fmt.Sprintf("reading %s %s/%s upstream: %v", c.kind, c.helmOp.Namespace, c.name, err)}}}
	}
	owner := copyspec.Owner{UpstreamID: e.cfg.UpstreamID, HelmOp: c.helmOp, Cluster: cluster.Name, Keep: c.keep}
	srcMeta, _ := metaOf(src)
	p := plan{ops: ops, srcRV: srcMeta.GetResourceVersion()}
	p.want = p.ops.desired(src, c.targetNS, owner)

	// When the informer has Courier's own copy, it answers without a
	// request -- already current, or to be updated from the cached
	// resourceVersion (a stale one only costs a 409 and a retry). Anything
	// else (absent from the cache, or not ours) is read live, which is how a
	// same-named object Courier does not own is found.
	if inCache && copyspec.OwnershipOf(cached, owner) == copyspec.OwnedBy {
		if _, fleets := copyspec.FleetCopy(cached); !fleets {
			p.decide(cached)
			if p.action == actionNone && p.srcRV == c.sourceRV {
				e.current.remember(client, c, cached.GetResourceVersion())
			}
			return p
		}
	}
	if e.createUnread(client, c, p.ops, inCache) {
		p.action, p.unread = actionCreate, true
		return p
	}
	cur, err := p.ops.get(ctx, c.targetNS, c.name)
	switch {
	case apierrors.IsNotFound(err):
		e.taken.observe(client.Key, c, false)
		p.action = actionCreate
		return p
	case err != nil:
		p.out = e.writeFailed(cluster, "reading "+what, err)
		return p
	}
	e.taken.observe(client.Key, c, p.judge(cur, owner, what, cluster.Name))
	return p
}

// foundCurrent is the outcome, counted, for a copy a pass finds current
// (made from the source at srcRV) and leaves alone.
func foundCurrent(srcRV string) outcome {
	copiesTotal.WithLabelValues("current", "").Inc()
	return outcome{status: synced(srcRV, nil)}
}

// decide records what Courier's own copy cur needs: nothing, an update, or
// (immutable, or a Secret type change) delete and create.
//
// A copy of this HelmOp written for another Fleet Cluster on the same
// kube-apiserver keeps naming that Cluster: only its content is judged
// (docs/design.md#clusters-sharing-a-kube-apiserver), so Clusters that share a kube-apiserver never
// rewrite each other's copies.
func (p *plan) decide(cur object) {
	p.cur = cur
	copyspec.AdoptWriter(p.want, cur)
	switch {
	case p.ops.upToDate(cur, p.want):
		p.out = foundCurrent(p.srcRV)
	case p.ops.needsRecreate(cur, p.want):
		p.action = actionRecreate
	default:
		p.action = actionUpdate
	}
}

// fleetsCopy is the outcome for a copy Fleet's own agent made (docs/design.md#fleets-own-copies):
// never written or deleted by Courier, reported Synced when its
// type and data are the source's, else Conflict.
func fleetsCopy(p plan, cur object, bundleDeployment, what, cluster string) outcome {
	if p.ops.sameData(cur, p.want) {
		copiesTotal.WithLabelValues("current", "").Inc()
		st := synced(p.srcRV, nil)
		st.Message = fmt.Sprintf("%s in cluster %s is Fleet's copy (BundleDeployment %s) and matches its source; Courier leaves it to Fleet",
			what, cluster, bundleDeployment)
		return outcome{status: st}
	}
	return conflict(fmt.Sprintf("%s in cluster %s is Fleet's copy (BundleDeployment %s) and differs from its source; Courier never writes Fleet's copies",
		what, cluster, bundleDeployment))
}

// conflict is the outcome for a same-named object Courier must leave alone.
func conflict(msg string) outcome {
	copiesTotal.WithLabelValues("failed", "Conflict").Inc()
	return outcome{reason: "Conflict", eventOK: true, status: copycontract.Status{Phase: courier.CopyPhaseConflict, Message: msg}}
}
