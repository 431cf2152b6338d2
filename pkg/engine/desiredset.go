package engine

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// desiredSet is what the view asked for: every HelmOp's copies, kept both
// per HelmOp (to replace one HelmOp's part) and per Cluster (for the
// workers), with what is known of each desired row and copy besides --
// which rows existed before DesiredComplete and have not been looked at
// yet, when each row's current source version was first seen, and which
// Clusters want each copy. It has its own lock and calls out to nothing
// while holding it.
type desiredSet struct {
	mu sync.Mutex
	// complete is set once the view has handed over every HelmOp
	// (DesiredComplete); until then no Cluster is reconciled, since a sweep
	// would remove the copies of HelmOps not handed over yet.
	complete bool
	// byOp holds each HelmOp's copies by cluster key, sorted by row key.
	byOp map[types.NamespacedName]map[string][]desiredCopy
	// byCluster names the HelmOps with copies in each cluster.
	byCluster map[string]map[types.NamespacedName]struct{}
	// sources counts the copyable copies of each source; a source no copy
	// needs any more leaves the source cache.
	sources map[sourceKey]int
	// initial holds the keys of rows handed over before DesiredComplete
	// whose copies no pass has looked at yet (createUnread).
	initial map[string]bool
	// observedAt is, by row key, when the row's current source
	// resourceVersion was first seen (the propagation metric).
	observedAt map[string]time.Time
	// wantedBy maps a copyID to the keys of the Clusters whose rows want
	// it (twins.go, and the echo filter).
	wantedBy map[string][]string
}

// handover is what setting one HelmOp's copies changed.
type handover struct {
	// changed are the cluster keys whose copies differ, sorted.
	changed []string
	// gone are the row keys no longer desired.
	gone []string
	// restated are the row keys that turned denied, or stopped being.
	restated []string
	// unused are the sources no copy needs any more.
	unused []sourceKey
	// complete is whether DesiredComplete had been called.
	complete bool
}

func newDesiredSet() *desiredSet {
	return &desiredSet{
		byOp:       map[types.NamespacedName]map[string][]desiredCopy{},
		byCluster:  map[string]map[types.NamespacedName]struct{}{},
		sources:    map[sourceKey]int{},
		initial:    map[string]bool{},
		observedAt: map[string]time.Time{},
		wantedBy:   map[string][]string{},
	}
}

// set replaces helmOp's copies with next (by cluster key, each sorted by
// row key; empty when it has none). Before DesiredComplete the rows are
// marked initial: they existed before the start, their copies may be
// there (or be in Conflict), so their first pass reads them.
func (d *desiredSet) set(helmOp types.NamespacedName, next map[string][]desiredCopy, now time.Time) handover {
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.byOp[helmOp]
	h := handover{changed: changedClusters(prev, next), complete: d.complete}
	h.gone = d.trackRowsLocked(prev, next, now)
	h.restated = deniedChanged(prev, next)
	h.unused = d.countSourcesLocked(prev, next)
	d.indexWantedLocked(prev, next)
	d.storeLocked(helmOp, prev, next)
	if !d.complete {
		for _, copies := range next {
			for _, c := range copies {
				d.initial[c.rowKey] = true
			}
		}
	}
	return h
}

// update replaces some of helmOp's copies with versions that differ only
// in their source's resourceVersion (UpdateDesired). It returns, by
// cluster key, the rows whose source version changed; ok is false, and
// nothing changes, before DesiredComplete, for a HelmOp not held, or when
// an update is not a copy held that way.
func (d *desiredSet) update(helmOp types.NamespacedName, updates map[string][]desiredCopy, now time.Time) (changed map[string][]string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.byOp[helmOp]
	if !d.complete || cur == nil {
		return nil, false
	}
	next := make(map[string][]desiredCopy, len(updates))
	for key, ups := range updates {
		copies := slices.Clone(cur[key])
		for _, u := range ups {
			i := slices.IndexFunc(copies, func(c desiredCopy) bool { return c.rowKey == u.rowKey })
			if i < 0 || !sameButSource(copies[i], u) {
				return nil, false
			}
			copies[i] = u
		}
		if !slices.Equal(copies, cur[key]) {
			next[key] = copies
		}
	}
	changed = make(map[string][]string, len(next))
	for key, copies := range next {
		for i, c := range copies {
			if c.sourceRV != cur[key][i].sourceRV {
				d.observedAt[c.rowKey] = now
				changed[key] = append(changed[key], c.rowKey)
			}
		}
		cur[key] = copies
	}
	return changed, true
}

// markComplete records that every HelmOp has been handed over, and
// reports whether it had not been before.
func (d *desiredSet) markComplete() (first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	first = !d.complete
	d.complete = true
	return first
}

// isComplete reports whether every HelmOp has been handed over.
func (d *desiredSet) isComplete() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.complete
}

// copiesFor returns the copies every HelmOp wants in one cluster, sorted
// by row key.
func (d *desiredSet) copiesFor(clusterKey string) []desiredCopy {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []desiredCopy
	for op := range d.byCluster[clusterKey] {
		out = append(out, d.byOp[op][clusterKey]...)
	}
	sortCopies(out)
	return out
}

// existedAtStart reports whether row rowKey was handed over before
// DesiredComplete and no pass has looked at its copy since.
func (d *desiredSet) existedAtStart(rowKey string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.initial[rowKey]
}

// lookedAt records that a pass has looked at row rowKey's copy (and
// recorded what it found).
func (d *desiredSet) lookedAt(rowKey string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.initial, rowKey)
}

// takeObservedAt returns when row rowKey's current source version was
// first seen, once: the first copy written from it ends the wait.
func (d *desiredSet) takeObservedAt(rowKey string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.observedAt[rowKey]
	delete(d.observedAt, rowKey)
	return at, ok
}

// wanted reports whether the Cluster clusterKey wants the copy id.
func (d *desiredSet) wanted(clusterKey, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.wantedBy[id], clusterKey)
}

// wantedByClusters returns the keys of the Clusters that want the copy id.
func (d *desiredSet) wantedByClusters(id string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.wantedBy[id])
}

// trackRowsLocked keeps the per-row records of one HelmOp in step with its
// rows -- when each row's current source resourceVersion was first seen,
// and nothing for rows that are gone -- and returns the rows gone.
func (d *desiredSet) trackRowsLocked(prev, next map[string][]desiredCopy, now time.Time) []string {
	old := map[string]string{} // row key -> source resourceVersion
	for _, copies := range prev {
		for _, c := range copies {
			old[c.rowKey] = c.sourceRV
		}
	}
	for _, copies := range next {
		for _, c := range copies {
			if rv, ok := old[c.rowKey]; !ok || rv != c.sourceRV {
				d.observedAt[c.rowKey] = now
			}
			delete(old, c.rowKey)
		}
	}
	gone := make([]string, 0, len(old))
	for key := range old {
		delete(d.observedAt, key)
		gone = append(gone, key)
	}
	slices.Sort(gone)
	return gone
}

// countSourcesLocked updates the count of copyable copies per source for
// one HelmOp going from prev to next, and returns the sources no copy
// needs any more.
func (d *desiredSet) countSourcesLocked(prev, next map[string][]desiredCopy) []sourceKey {
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

// indexWantedLocked updates wantedBy for one HelmOp whose copies go from
// prev to next; the other HelmOps' entries are not touched.
func (d *desiredSet) indexWantedLocked(prev, next map[string][]desiredCopy) {
	for clusterKey, copies := range prev {
		for _, c := range copies {
			id := copyID(c.helmOp, c.kind, c.targetNS, c.name)
			keys := d.wantedBy[id]
			if i := slices.Index(keys, clusterKey); i >= 0 {
				keys = slices.Delete(keys, i, i+1)
			}
			if len(keys) == 0 {
				delete(d.wantedBy, id)
			} else {
				d.wantedBy[id] = keys
			}
		}
	}
	for clusterKey, copies := range next {
		for _, c := range copies {
			if c.denied {
				continue // no Cluster wants a copy of a denied source
			}
			id := copyID(c.helmOp, c.kind, c.targetNS, c.name)
			d.wantedBy[id] = append(d.wantedBy[id], clusterKey)
		}
	}
}

// deniedChanged returns the keys of the rows in both prev and next that
// turned denied or stopped being denied, sorted.
func deniedChanged(prev, next map[string][]desiredCopy) []string {
	was := map[string]bool{}
	for _, copies := range prev {
		for _, c := range copies {
			was[c.rowKey] = c.denied
		}
	}
	var out []string
	for _, copies := range next {
		for _, c := range copies {
			if denied, ok := was[c.rowKey]; ok && denied != c.denied {
				out = append(out, c.rowKey)
			}
		}
	}
	slices.Sort(out)
	return out
}

// storeLocked stores next as helmOp's copies, replacing prev.
func (d *desiredSet) storeLocked(helmOp types.NamespacedName, prev, next map[string][]desiredCopy) {
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
