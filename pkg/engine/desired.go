package engine

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// The engine's desired state is handed over one HelmOp at a time
// (SetDesired), and kept both per HelmOp (to replace one HelmOp's part) and
// per Cluster (for the workers). A change to one HelmOp costs work for its
// own copies, and queues only the Clusters where they changed.

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
}

// desiredState is what the view asked for. Guarded by Engine.mu.
type desiredState struct {
	// complete is set once the view has handed over every HelmOp
	// (DesiredComplete); until then no Cluster is reconciled, since a sweep
	// would remove the copies of HelmOps not handed over yet.
	complete bool
	// byOp holds each HelmOp's copies by cluster key, sorted by row key.
	byOp map[types.NamespacedName]map[string][]desiredCopy
	// byCluster names the HelmOps with copies in each cluster.
	byCluster map[string]map[types.NamespacedName]struct{}
	// rows maps each desired row key to its HelmOp.
	rows map[string]types.NamespacedName
	// sources counts the copyable copies of each source; a source no copy
	// needs any more leaves the source cache.
	sources map[sourceKey]int
}

// leftoverState holds the copies no row wants any more that the last pass
// over each cluster found, by HelmOp and by cluster. Guarded by Engine.mu.
type leftoverState struct {
	byOp      map[types.NamespacedName]map[string][]copycontract.Leftover // sorted
	byCluster map[string]map[types.NamespacedName]struct{}
}

// pendingChange is what the next notify reports for one HelmOp.
type pendingChange struct {
	rows      map[string]struct{}
	leftovers bool
}

func newDesiredState() desiredState {
	return desiredState{
		byOp:      map[types.NamespacedName]map[string][]desiredCopy{},
		byCluster: map[string]map[types.NamespacedName]struct{}{},
		rows:      map[string]types.NamespacedName{},
		sources:   map[sourceKey]int{},
	}
}

func newLeftoverState() leftoverState {
	return leftoverState{
		byOp:      map[types.NamespacedName]map[string][]copycontract.Leftover{},
		byCluster: map[string]map[types.NamespacedName]struct{}{},
	}
}

// SetDesired replaces one HelmOp's rows (nil when it has none, or is gone)
// and queues the clusters where its copies changed. Other HelmOps' copies
// are not looked at. Nothing is queued before DesiredComplete.
func (e *Engine) SetDesired(helmOp types.NamespacedName, rows []*courier.DownstreamCopy) {
	next := desiredCopies(helmOp, rows)
	now := e.now()
	e.mu.Lock()
	prev := e.desired.byOp[helmOp]
	changed := changedClusters(prev, next)
	e.trackRowsLocked(helmOp, prev, next, now)
	unused := e.desired.countSources(prev, next)
	e.indexWanted(prev, next)
	e.desired.set(helmOp, prev, next)
	complete := e.desired.complete
	if complete {
		for _, key := range changed {
			e.oweWholeLocked(key)
		}
	} else {
		// Rows handed over before DesiredComplete existed before the start:
		// their copies may be there (or be in Conflict), so their first
		// pass reads them (createUnread).
		for _, copies := range next {
			for _, c := range copies {
				e.initial[c.rowKey] = true
			}
		}
	}
	e.mu.Unlock()

	e.sources.forget(unused...)
	if len(rows) == 0 {
		e.copied.forget(helmOp)
	}
	if complete {
		for _, key := range changed {
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
	e.mu.Lock()
	cur := e.desired.byOp[helmOp]
	if !e.desired.complete || cur == nil {
		e.mu.Unlock()
		return false
	}
	next := make(map[string][]desiredCopy, len(updates))
	for key, ups := range updates {
		copies := slices.Clone(cur[key])
		for _, u := range ups {
			i := slices.IndexFunc(copies, func(c desiredCopy) bool { return c.rowKey == u.rowKey })
			if i < 0 || !sameButSource(copies[i], u) {
				e.mu.Unlock()
				return false
			}
			copies[i] = u
		}
		if !slices.Equal(copies, cur[key]) {
			next[key] = copies
		}
	}
	for key, copies := range next {
		for i, c := range copies {
			if c.sourceRV != cur[key][i].sourceRV {
				e.observedAt[c.rowKey] = now
				e.oweSourceLocked(key, c.rowKey)
			}
		}
		cur[key] = copies
	}
	e.mu.Unlock()
	changed := slices.Sorted(maps.Keys(next))
	for _, key := range changed {
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
	e.mu.Lock()
	first := !e.desired.complete
	e.desired.complete = true
	e.mu.Unlock()
	if first {
		e.queueAllClusters()
	}
}

// desiredComplete reports whether DesiredComplete was called.
func (e *Engine) desiredComplete() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.desired.complete
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
			copyable:       copycontract.Copyable(r.Spec),
		}
		key := r.Namespace + "/" + r.Spec.Cluster
		next[key] = append(next[key], d)
	}
	for _, copies := range next {
		sortCopies(copies)
	}
	return next
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

// trackRowsLocked keeps the per-row records of one HelmOp in step with its
// rows: when each row's current source resourceVersion was first seen (for
// the propagation metric), and no status or record for rows that are gone.
func (e *Engine) trackRowsLocked(helmOp types.NamespacedName, prev, next map[string][]desiredCopy, now time.Time) {
	old := map[string]string{} // row key -> source resourceVersion
	for _, copies := range prev {
		for _, c := range copies {
			old[c.rowKey] = c.sourceRV
		}
	}
	for _, copies := range next {
		for _, c := range copies {
			if rv, ok := old[c.rowKey]; !ok || rv != c.sourceRV {
				e.observedAt[c.rowKey] = now
			}
			delete(old, c.rowKey)
			e.desired.rows[c.rowKey] = helmOp
		}
	}
	for key := range old {
		delete(e.observedAt, key)
		delete(e.statuses, key)
		delete(e.desired.rows, key)
	}
}

// countSources updates the count of copyable copies per source for one
// HelmOp going from prev to next, and returns the sources no copy needs
// any more.
func (d *desiredState) countSources(prev, next map[string][]desiredCopy) []sourceKey {
	for _, copies := range next {
		for _, c := range copies {
			if c.copyable {
				d.sources[sourceKey{c.kind, c.helmOp.Namespace, c.name}]++
			}
		}
	}
	var unused []sourceKey
	for _, copies := range prev {
		for _, c := range copies {
			if !c.copyable {
				continue
			}
			k := sourceKey{c.kind, c.helmOp.Namespace, c.name}
			if d.sources[k]--; d.sources[k] <= 0 {
				delete(d.sources, k)
				unused = append(unused, k)
			}
		}
	}
	return unused
}

// set stores next as helmOp's copies, replacing prev.
func (d *desiredState) set(helmOp types.NamespacedName, prev, next map[string][]desiredCopy) {
	for key := range prev {
		if _, ok := next[key]; ok {
			continue
		}
		delete(d.byCluster[key], helmOp)
		if len(d.byCluster[key]) == 0 {
			delete(d.byCluster, key)
		}
	}
	for key := range next {
		ops := d.byCluster[key]
		if ops == nil {
			ops = map[types.NamespacedName]struct{}{}
			d.byCluster[key] = ops
		}
		ops[helmOp] = struct{}{}
	}
	if len(next) == 0 {
		delete(d.byOp, helmOp)
		return
	}
	d.byOp[helmOp] = next
}

// copiesFor returns the copies every HelmOp wants in one cluster, sorted
// by row key.
func (e *Engine) copiesFor(clusterKey string) []desiredCopy {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []desiredCopy
	for op := range e.desired.byCluster[clusterKey] {
		out = append(out, e.desired.byOp[op][clusterKey]...)
	}
	sortCopies(out)
	return out
}

// record stores a row's status and reports whether it changed. A row no
// longer desired (its HelmOp changed while its cluster was being
// reconciled) gets no status.
func (e *Engine) record(rowKey string, s copycontract.Status) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	op, desired := e.desired.rows[rowKey]
	if !desired {
		return false
	}
	delete(e.initial, rowKey) // its status now says what its pass found
	prev, ok := e.statuses[rowKey]
	if ok && prev.Phase == s.Phase && prev.Message == s.Message && prev.SyncedResourceVersion == s.SyncedResourceVersion {
		return false
	}
	if s.LastSyncTime == nil && ok {
		s.LastSyncTime = prev.LastSyncTime
	}
	// A copy found current (after a restart, say) counts as synced now, the
	// first time this process confirms it.
	if s.LastSyncTime == nil && s.Phase == courier.CopyPhaseSynced {
		s.LastSyncTime = nowTime(e.now())
	}
	e.statuses[rowKey] = s
	e.pendingLocked(op).rows[rowKey] = struct{}{}
	return true
}

// Status returns what the engine last recorded for a row.
func (e *Engine) Status(rowKey string) (copycontract.Status, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.statuses[rowKey]
	return s, ok
}

// Leftovers returns one HelmOp's copies that no row wants any more and
// that the last pass over each cluster found still there (kept, or not
// removed yet).
func (e *Engine) Leftovers(helmOp types.NamespacedName) []copycontract.Leftover {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []copycontract.Leftover
	for _, l := range e.leftovers.byOp[helmOp] {
		out = append(out, l...)
	}
	sortLeftovers(out)
	return out
}

func sortLeftovers(ls []copycontract.Leftover) {
	slices.SortFunc(ls, func(a, b copycontract.Leftover) int {
		if a.HelmOp != b.HelmOp {
			return strings.Compare(a.HelmOp.String(), b.HelmOp.String())
		}
		for _, c := range [][2]string{{a.Cluster, b.Cluster}, {a.Kind, b.Kind}, {a.Name, b.Name}, {a.TargetNamespace, b.TargetNamespace}} {
			if c[0] != c[1] {
				return strings.Compare(c[0], c[1])
			}
		}
		return 0
	})
}

// setLeftovers records a cluster's leftover copies (nil forgets the
// cluster) and reports whether they changed; the HelmOps whose leftovers
// changed are reported by the next notify.
func (e *Engine) setLeftovers(clusterKey string, left []copycontract.Leftover) bool {
	byOp := map[types.NamespacedName][]copycontract.Leftover{}
	for _, l := range left {
		byOp[l.HelmOp] = append(byOp[l.HelmOp], l)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := &e.leftovers
	changed := false
	for op := range st.byCluster[clusterKey] {
		if _, ok := byOp[op]; ok {
			continue
		}
		delete(st.byOp[op], clusterKey)
		if len(st.byOp[op]) == 0 {
			delete(st.byOp, op)
		}
		e.pendingLocked(op).leftovers = true
		changed = true
	}
	delete(st.byCluster, clusterKey)
	for op, ls := range byOp {
		sortLeftovers(ls)
		if st.byCluster[clusterKey] == nil {
			st.byCluster[clusterKey] = map[types.NamespacedName]struct{}{}
		}
		st.byCluster[clusterKey][op] = struct{}{}
		if slices.Equal(st.byOp[op][clusterKey], ls) {
			continue
		}
		if st.byOp[op] == nil {
			st.byOp[op] = map[string][]copycontract.Leftover{}
		}
		st.byOp[op][clusterKey] = ls
		e.pendingLocked(op).leftovers = true
		changed = true
	}
	return changed
}

func (e *Engine) pendingLocked(op types.NamespacedName) *pendingChange {
	p := e.pending[op]
	if p == nil {
		p = &pendingChange{rows: map[string]struct{}{}}
		e.pending[op] = p
	}
	return p
}

// notify tells the view (OnStatusChange, called without locks held) what
// changed in the engine's record since the last notify: which rows' status
// and which HelmOps' leftovers.
func (e *Engine) notify() {
	e.mu.Lock()
	pending := e.pending
	e.pending = map[types.NamespacedName]*pendingChange{}
	e.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	changes := make([]copycontract.StatusChange, 0, len(pending))
	for op, p := range pending {
		ch := copycontract.StatusChange{HelmOp: op, Leftovers: p.leftovers}
		for key := range p.rows {
			ch.Rows = append(ch.Rows, key)
		}
		sort.Strings(ch.Rows)
		changes = append(changes, ch)
	}
	slices.SortFunc(changes, func(a, b copycontract.StatusChange) int {
		return strings.Compare(a.HelmOp.String(), b.HelmOp.String())
	})
	e.cfg.OnStatusChange(changes)
}
