package engine

import (
	"maps"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// The engine's desired state is handed over one HelmOp at a time
// (SetDesired), and kept both per HelmOp (to replace one HelmOp's part) and
// per Cluster (for the workers) by the desired set (desiredset.go). A
// change to one HelmOp costs work for its own copies, and queues only the
// Clusters where they changed.
//
// A handover touches three owners, one after the other, never two locks at
// once: the status record accepts the rows added (before the desired set
// holds them), the desired set takes the copies, the status record drops
// the rows gone (after the desired set let them go), and the pass scopes
// owe the Clusters whose copies changed; only then are those queued.
// Handovers are serialized by Engine.handover, taken before any of those
// locks, so two handovers of one HelmOp never interleave.

// desiredCopy is one row as the engine needs it.
type desiredCopy struct {
	rowKey         string
	helmOp         types.NamespacedName
	kind, name     string
	targetNS       string
	serviceAccount string
	keep           bool
	sourceRV       string
	// copyable is false for rows the engine must not write (an unsupported
	// kind, no name) and for sources that do not exist (whose copies stay
	// where they are). It comes from the row's spec (copycontract.Copyable),
	// never from its status.
	copyable bool
	// denied: the view found the row's source may never be exported (its
	// row Denied and not delivered). Nothing is written for it, its copy
	// is no copy any row wants (the sweep removes it even under
	// keepResources), and a pass only looks for Fleet's own copy of it
	// (denied.go).
	denied bool
}

// SetDesired replaces one HelmOp's rows (nil when it has none, or is gone)
// and queues the clusters where its copies changed. Other HelmOps' copies
// are not looked at. Nothing is queued before DesiredComplete.
func (e *Engine) SetDesired(helmOp types.NamespacedName, rows []*courier.DownstreamCopy) {
	next := desiredCopies(helmOp, rows)
	now := e.now()
	e.handover.Lock()
	e.statuses.accept(helmOp, rowKeys(next))
	h := e.desired.set(helmOp, next, now)
	e.statuses.drop(h.gone)
	// A row that turned Denied, or stopped being Denied, starts afresh:
	// what a pass found before was about another kind of row.
	restated := e.statuses.forget(h.restated)
	if h.complete {
		e.scopes.oweWhole(h.changed...)
	}
	e.handover.Unlock()

	e.sources.forget(h.unused...)
	if len(rows) == 0 {
		e.copied.forget(helmOp)
	}
	if restated {
		e.notify()
	}
	if h.complete {
		for _, key := range h.changed {
			e.queue.Add(key)
		}
	}
}

// UpdateDesired replaces some rows of one HelmOp, handed over before by
// SetDesired, with their new versions that differ only in their source's
// resourceVersion, and queues the clusters whose copies changed, each for
// a pass over those rows only (scope.go). It costs work for those rows
// only: a change of one source listed for 1,000 Clusters no longer diffs
// the HelmOp's other 9,000 rows before the first Cluster is queued. It
// returns false, changing nothing, when a row is not one it holds that way
// (unknown, or changed in another field); the caller then hands over the
// whole HelmOp with SetDesired. Before DesiredComplete it always returns
// false.
func (e *Engine) UpdateDesired(helmOp types.NamespacedName, rows []*courier.DownstreamCopy) bool {
	updates := desiredCopies(helmOp, rows)
	now := e.now()
	e.handover.Lock()
	changed, ok := e.desired.update(helmOp, updates, now)
	for key, rowKeys := range changed {
		e.scopes.oweRows(key, rowKeys...)
	}
	e.handover.Unlock()
	if !ok {
		return false
	}
	for _, key := range slices.Sorted(maps.Keys(changed)) {
		e.queue.Add(key)
	}
	return true
}

// sameButSource reports whether two versions of a copy differ at most in
// their source's resourceVersion.
func sameButSource(a, b desiredCopy) bool {
	a.sourceRV = b.sourceRV
	return a == b
}

// DesiredComplete is called once the view has handed over every HelmOp.
// The first call queues every Cluster, so copies left by HelmOps deleted
// while Courier was down are swept; later calls do nothing.
func (e *Engine) DesiredComplete() {
	if e.desired.markComplete() {
		e.queueAllClusters()
	}
}

// desiredCopies turns one HelmOp's rows into its copies by cluster key,
// each cluster's sorted by row key.
func desiredCopies(helmOp types.NamespacedName, rows []*courier.DownstreamCopy) map[string][]desiredCopy {
	next := map[string][]desiredCopy{}
	for _, r := range rows {
		d := desiredCopy{
			rowKey:         r.Namespace + "/" + r.Name,
			helmOp:         helmOp,
			kind:           r.Spec.Source.Kind,
			name:           r.Spec.Source.Name,
			targetNS:       r.Spec.Target.Namespace,
			serviceAccount: r.Spec.ServiceAccount,
			keep:           r.Spec.KeepResources,
			sourceRV:       r.Spec.Source.ResourceVersion,
		}
		d.denied = !courier.Delivered(r.Labels) && r.Status.Phase == courier.CopyPhaseDenied
		d.copyable = !d.denied && copycontract.Copyable(r.Spec)
		key := r.Namespace + "/" + r.Spec.Cluster
		next[key] = append(next[key], d)
	}
	for _, copies := range next {
		sortCopies(copies)
	}
	return next
}

// rowKeys returns the row keys of copies.
func rowKeys(copies map[string][]desiredCopy) []string {
	var keys []string
	for _, cs := range copies {
		for _, c := range cs {
			keys = append(keys, c.rowKey)
		}
	}
	return keys
}

func sortCopies(copies []desiredCopy) {
	sort.Slice(copies, func(i, j int) bool { return copies[i].rowKey < copies[j].rowKey })
}

// changedClusters returns the cluster keys whose copies differ between
// prev and next.
func changedClusters(prev, next map[string][]desiredCopy) []string {
	var changed []string
	for key, copies := range next {
		if !slices.Equal(copies, prev[key]) {
			changed = append(changed, key)
		}
	}
	for key := range prev {
		if _, ok := next[key]; !ok {
			changed = append(changed, key)
		}
	}
	sort.Strings(changed)
	return changed
}

// record stores a row's status (statusRecord.record) and reports whether
// it changed; a row recorded has been looked at by a pass.
func (e *Engine) record(rowKey string, s copycontract.Status) bool {
	accepted, changed := e.statuses.record(rowKey, s, e.now)
	if accepted {
		e.desired.lookedAt(rowKey) // its status now says what its pass found
	}
	return changed
}

// Status returns what the engine last recorded for a row.
func (e *Engine) Status(rowKey string) (copycontract.Status, bool) {
	return e.statuses.status(rowKey)
}

// Leftovers returns one HelmOp's copies that no row wants any more and
// that the last pass over each cluster found still there (kept, or not
// removed yet).
func (e *Engine) Leftovers(helmOp types.NamespacedName) []copycontract.Leftover {
	return e.statuses.leftoversOf(helmOp)
}

// notify tells the view (OnStatusChange, called without locks held) what
// changed in the engine's record since the last notify: which rows' status
// and which HelmOps' leftovers.
func (e *Engine) notify() {
	if changes := e.statuses.takeChanges(); len(changes) > 0 {
		e.cfg.OnStatusChange(changes)
	}
}
