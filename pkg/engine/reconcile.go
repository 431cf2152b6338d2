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
// rows, then removes the copies nothing wants any more. Copies are handled
// in groups of the same HelmOp and ServiceAccount: each group's copies are
// planned (read-only), its permissions are checked as its ServiceAccount,
// and only then is anything written, so a forbidden group writes nothing.
func (e *Engine) reconcileCluster(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	cluster, err := e.cfg.Clusters.Clusters(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// The Cluster is gone: its rows are gone with it, and Courier can no
		// longer reach it to remove copies.
		e.cfg.Downstream.Forget(key)
		e.forgetEchoes(key)
		e.forgetTwin(key)
		e.forgetIdentities(key)
		clusterReachable.DeleteLabelValues(key)
		if e.setLeftovers(key, nil) {
			e.notify()
		}
		return nil
	} else if err != nil {
		return err
	}
	if Pulled(cluster) {
		e.leavePulled(key) // its agent writes there (DESIGN §9)
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("cluster", key)
	copies := e.copiesFor(key)

	client, err := e.cfg.Downstream.Get(ctx, cluster)
	if err != nil {
		e.markAll(copies, courier.CopyPhaseUnreachable, err.Error())
		return err
	}
	e.setServer(key, client)
	reads := e.reads(ctx, client, key, copies) // before the wait: the first pass's reads overlap it
	e.waitSynced(ctx, client)

	changed := false
	var retryErr error
	namespaces := map[string]bool{} // destination namespace -> exists
	handled := map[string]bool{}
	for _, group := range groupCopies(copies) {
		if e.draining.Load() {
			// Shutting down: the groups written so far are whole; the rest
			// wait for the next process or leader.
			return nil
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
			e.notify()
			return fatal
		}
	}
	if e.draining.Load() {
		if changed {
			e.notify()
		}
		return nil
	}
	// Only the leader removes copies; a follower reports them Deleting.
	left, err := e.sweep(ctx, client, cluster, copies, e.Leading(), reads.unlabelled)
	if err != nil {
		if unreachable(err) {
			clusterReachable.WithLabelValues(key).Set(0)
		}
		retryErr = err
	} else {
		clusterReachable.WithLabelValues(key).Set(1)
	}
	if left != nil || err == nil {
		changed = e.setLeftovers(key, left) || changed
	}
	e.passEnded(client)
	if changed {
		e.notify()
	}
	if retryErr != nil {
		logger.V(2).Info("Cluster has copies that did not converge", "err", retryErr)
	}
	return retryErr
}

// logOutcome logs a copy whose status changed, with the HelmOp, the
// cluster (in logger) and the object: a write at --v=2, a problem at
// --v=1. Messages name objects and paths, never data.
func logOutcome(logger klog.Logger, c desiredCopy, out outcome) {
	kv := []any{"helmop", c.helmOp.String(), "kind", c.kind, "object", c.targetNS + "/" + c.name}
	switch {
	case out.wrote:
		logger.V(2).Info("Copied", append(kv, "how", out.reason)...)
	case out.status.Phase != courier.CopyPhaseSynced:
		logger.V(1).Info("Copy not synced", append(kv, "phase", out.status.Phase, "message", out.status.Message)...)
	}
}

// groupCopies returns the copyable rows grouped by HelmOp and
// ServiceAccount, in a stable order.
func groupCopies(copies []desiredCopy) [][]desiredCopy {
	index := map[string]int{}
	var groups [][]desiredCopy
	for _, c := range copies {
		if !c.copyable {
			continue
		}
		k := c.helmOp.String() + "|" + c.serviceAccount
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
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
		e.notify()
	}
}

// markRest marks Unreachable the copyable rows a failed pass did not reach;
// rows it handled (a copy written before the cluster stopped answering,
// say) keep what the pass recorded.
func (e *Engine) markRest(copies []desiredCopy, handled map[string]bool, msg string) {
	for _, c := range copies {
		if c.copyable && !handled[c.rowKey] {
			e.record(c.rowKey, copyview.EngineStatus{Phase: courier.CopyPhaseUnreachable, Message: msg})
		}
	}
}

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

// syncGroup plans, checks and writes one group's copies. It returns one
// outcome per copy, and an error when the cluster is unreachable.
func (e *Engine) syncGroup(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, group []desiredCopy,
	fallback func() (bool, error), namespaces map[string]bool) ([]outcome, error) {
	out := make([]outcome, len(group))
	all := func(o outcome) []outcome {
		for i := range out {
			out[i] = o
		}
		return out
	}
	plans := make([]plan, len(group))
	for i, c := range group {
		plans[i] = e.planCopy(ctx, client, cluster, c)
		if plans[i].out.fatal != nil {
			return all(plans[i].out), plans[i].out.fatal
		}
	}
	if !e.Leading() {
		return observed(cluster, group, plans), nil
	}
	if !needsWrite(plans) {
		for i := range plans {
			out[i] = plans[i].out
		}
		return out, nil // nothing to write: no identity needed
	}
	// Who writes is only looked up when something is to be written, so a
	// pass over current copies costs no request.
	id, refusal, err := e.resolveIdentity(ctx, client, group[0].serviceAccount, fallback)
	if err != nil {
		o := e.writeFailed(cluster, "looking up the ServiceAccount", err)
		return all(o), o.fatal
	}
	if refusal != "" {
		copiesTotal.WithLabelValues("failed", "Forbidden").Inc()
		return all(outcome{retry: true, reason: "Forbidden", eventOK: true,
			status: copyview.EngineStatus{Phase: courier.CopyPhaseForbidden, Message: refusal}}), nil
	}
	if id.serviceAccount != "" {
		needs, o := e.accessNeeded(ctx, client, cluster, group, plans, namespaces)
		if o != nil {
			return all(*o), o.fatal
		}
		denied, err := e.checkAccess(ctx, id, needs)
		if err != nil {
			o := e.writeFailed(cluster, "checking the permissions of "+id.user(), err)
			return all(o), o.fatal
		}
		if denied != "" {
			if group[0].serviceAccount == "" {
				e.fallbacks.forget(client.Key) // ask again whether the fallback exists
			}
			copiesTotal.WithLabelValues("failed", "Forbidden").Inc()
			return all(outcome{retry: true, reason: "Forbidden", eventOK: true,
				status: copyview.EngineStatus{Phase: courier.CopyPhaseForbidden, Message: fmt.Sprintf("cluster %s: %s", cluster.Name, denied)}}), nil
		}
	}
	makeNamespace := func(ns string) error {
		if o := e.ensureNamespace(ctx, client, id, cluster, ns); o != nil {
			return o.fatal // nil unless unreachable: its copies then try again, alone, and say why
		}
		namespaces[ns] = true
		return nil
	}
	fatal := e.writeGroup(len(group), namespaces, plans, group, makeNamespace, func(i int) outcome {
		o := e.execute(ctx, client, id, cluster, group[i], plans[i], namespaces)
		if o.status.Phase == courier.CopyPhaseForbidden {
			id.refused() // cached allows may be stale: ask again next pass
			if group[0].serviceAccount == "" {
				e.fallbacks.forget(client.Key) // and whether the fallback exists
			}
		}
		out[i] = o
		return o
	})
	return out, fatal
}

// needsWrite reports whether any plan writes.
func needsWrite(plans []plan) bool {
	for _, p := range plans {
		if p.action != actionNone {
			return true
		}
	}
	return false
}

// accessNeeded lists what a ServiceAccount needs to carry out plans: for a
// copy to create, the namespace too when it does not exist (read here, and
// remembered in namespaces). It returns an outcome for every copy when
// reading a namespace failed.
//
// Courier's own identity is not checked, so it never reads namespaces: a
// create makes its namespace and takes AlreadyExists for an answer
// (ensureNamespace), one round trip where a read and then a create were
// two.
func (e *Engine) accessNeeded(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, group []desiredCopy, plans []plan,
	namespaces map[string]bool) ([]access, *outcome) {
	var needs []access
	for i, c := range group {
		resource := strings.ToLower(c.kind) + "s"
		switch plans[i].action {
		case actionCreate:
			exists, ok := namespaces[c.targetNS]
			if !ok {
				var o *outcome
				if exists, o = e.namespaceExists(ctx, client, cluster, c.targetNS); o != nil {
					return nil, o
				}
				namespaces[c.targetNS] = exists
			}
			if !exists {
				needs = append(needs, access{verb: "create", resource: "namespaces", name: c.targetNS})
			}
			needs = append(needs, access{verb: "create", resource: resource, namespace: c.targetNS})
		case actionUpdate:
			needs = append(needs, access{verb: "update", resource: resource, namespace: c.targetNS})
		case actionRecreate:
			needs = append(needs, access{verb: "delete", resource: resource, namespace: c.targetNS},
				access{verb: "create", resource: resource, namespace: c.targetNS})
		}
	}
	return needs, nil
}

// namespaceExists reads a destination namespace with Courier's own
// identity.
func (e *Engine) namespaceExists(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, ns string) (bool, *outcome) {
	_, err := client.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		o := e.writeFailed(cluster, "reading namespace "+ns, err)
		return false, &o
	}
	return err == nil, nil
}

// ensureNamespace creates a destination namespace not known to exist, as
// id; one that exists already is fine. An identity that may not create
// namespaces is refused even where the namespace exists (authorization
// comes first), so a refusal is followed by a read: an existing namespace
// is then fine too.
func (e *Engine) ensureNamespace(ctx context.Context, client *downstream.Client, id identity, cluster *fleet.Cluster, ns string) *outcome {
	_, err := id.writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{FieldManager: "courier"})
	if apierrors.IsForbidden(err) {
		if exists, o := e.namespaceExists(ctx, client, cluster, ns); o != nil || exists {
			return o
		}
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		o := e.writeFailed(cluster, fmt.Sprintf("creating namespace %s as %s", ns, id.user()), err)
		return &o
	}
	return nil
}

// observed is what a replica that does not hold the lease records for a
// group: what its plans found, with copies that need a write shown as
// Pending. It checks no permission and writes nothing.
func observed(cluster *fleet.Cluster, group []desiredCopy, plans []plan) []outcome {
	out := make([]outcome, len(group))
	for i, c := range group {
		what := describe(c.kind, c.targetNS, c.name)
		switch plans[i].action {
		case actionNone:
			out[i] = plans[i].out
		case actionCreate:
			out[i] = outcome{status: copyview.EngineStatus{Phase: courier.CopyPhasePending,
				Message: fmt.Sprintf("%s does not exist in cluster %s yet; the leader writes it", what, cluster.Name)}}
		default:
			out[i] = outcome{status: copyview.EngineStatus{Phase: courier.CopyPhasePending,
				Message: fmt.Sprintf("%s in cluster %s differs from its source; the leader updates it", what, cluster.Name)}}
		}
	}
	return out
}

// planCopy reads the source and the downstream object and decides what the
// copy needs, without writing.
func (e *Engine) planCopy(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, c desiredCopy) plan {
	what := describe(c.kind, c.targetNS, c.name)
	src, err := e.sources.get(ctx, sourceKey{c.kind, c.helmOp.Namespace, c.name}, c.sourceRV, c.rowKey)
	if apierrors.IsNotFound(err) {
		return plan{out: outcome{status: copyview.EngineStatus{Phase: courier.CopyPhaseSourceMissing,
			Message: fmt.Sprintf("%s %s/%s does not exist", c.kind, c.helmOp.Namespace, c.name)}}}
	} else if err != nil {
		return plan{out: outcome{retry: true, reason: "SourceReadFailed", status: copyview.EngineStatus{Phase: courier.CopyPhasePending,
			Message: fmt.Sprintf("reading %s %s/%s upstream: %v", c.kind, c.helmOp.Namespace, c.name, err)}}}
	}
	owner := copyspec.Owner{UpstreamID: e.cfg.UpstreamID, HelmOp: c.helmOp, Cluster: cluster.Name, Keep: c.keep}
	srcMeta, _ := metaOf(src)
	// Planning only reads; execute writes through the group's identity.
	p := plan{ops: objectOps(client, client.Kube, c.kind), srcRV: srcMeta.GetResourceVersion()}
	p.want = p.ops.desired(src, c.targetNS, owner)

	// The informer holds Courier's own copies: when it has this one, it
	// answers without a request -- already current, or to be updated from
	// the cached resourceVersion (a stale one only costs a 409 and a retry).
	// Anything else (absent from the cache, or not ours) is read live, which
	// is how a same-named object Courier does not own is found.
	if cur, ok := p.ops.cached(c.targetNS, c.name); ok && copyspec.OwnershipOf(cur, owner) == copyspec.OwnedBy {
		if _, fleets := copyspec.FleetCopy(cur); !fleets {
			p.decide(cur)
			return p
		}
	}
	if e.createUnread(client, c, p.ops) {
		p.action, p.unread = actionCreate, true
		return p
	}
	cur, err := p.ops.get(ctx, c.targetNS, c.name)
	switch {
	case apierrors.IsNotFound(err):
		p.action = actionCreate
		return p
	case err != nil:
		p.out = e.writeFailed(cluster, "reading "+what, err)
		return p
	}
	p.judge(cur, owner, what, cluster.Name)
	return p
}

// decide records what Courier's own copy cur needs: nothing, an update, or
// (immutable, or a Secret type change) delete and create.
//
// A copy of this HelmOp written for another Fleet Cluster on the same
// kube-apiserver keeps naming that Cluster: only its content is judged
// (DESIGN §3 rule 11), so Clusters that share a kube-apiserver never
// rewrite each other's copies.
func (p *plan) decide(cur object) {
	p.cur = cur
	copyspec.AdoptWriter(p.want, cur)
	switch {
	case p.ops.upToDate(cur, p.want):
		copiesTotal.WithLabelValues("current", "").Inc()
		p.out = outcome{status: synced(p.srcRV, nil)}
	case p.ops.needsRecreate(cur, p.want):
		p.action = actionRecreate
	default:
		p.action = actionUpdate
	}
}

// fleetsCopy is the outcome for a copy Fleet's own agent made (DESIGN §3
// rule 12): never written or deleted by Courier, reported Synced when its
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
	return outcome{reason: "Conflict", eventOK: true, status: copyview.EngineStatus{Phase: courier.CopyPhaseConflict, Message: msg}}
}

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
		return e.written(c, p.srcRV, "Created")
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
		return e.written(c, p.srcRV, "Replaced")
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
		return e.written(c, p.srcRV, "Updated")
	}
	return p.out
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
func (e *Engine) writeFailed(cluster *fleet.Cluster, doing string, err error) outcome {
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
	if e.cfg.Recorder == nil || !out.eventOK || !e.Leading() {
		// Every replica observes conflicts; only the leader reports them,
		// so each appears once.
		return
	}
	ref := e.helmOpRef(c.helmOp)
	if out.wrote {
		e.cfg.Recorder.Eventf(ref, corev1.EventTypeNormal, "Copied", "%s %s copied to %s/%s in cluster %s", c.kind, c.name, c.targetNS, c.name, cluster.Name)
		return
	}
	e.cfg.Recorder.Event(ref, corev1.EventTypeWarning, out.reason, out.status.Message)
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
