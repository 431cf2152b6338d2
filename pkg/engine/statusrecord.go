package engine

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// statusRecord is what the engine tells the view (or the agent's
// reporter): each desired row's last outcome, the copies no row wants any
// more that the last pass over each Cluster found, and what changed in
// either since the last notification. It decides nothing the engine does:
// passes write to it and the view reads it (Engine.Status,
// Engine.Leftovers). It has its own lock and calls out to nothing while
// holding it; the notification is sent by the engine, outside it
// (Engine.notify).
type statusRecord struct {
	mu sync.Mutex
	// rows are the row keys that may have a status, with their HelmOp:
	// the rows handed over and not taken away since (accept, drop). A row
	// no longer desired gets no status.
	rows map[string]types.NamespacedName
	// statuses are the rows' last outcomes, by row key; only rows in rows
	// have one.
	statuses  map[string]copycontract.Status
	leftovers leftoverState
	// pending is what the next notification tells, by HelmOp.
	pending map[types.NamespacedName]*pendingChange
}

// leftoverState holds the copies no row wants any more that the last pass
// over each cluster found, by HelmOp and by cluster.
type leftoverState struct {
	byOp      map[types.NamespacedName]map[string][]copycontract.Leftover // sorted
	byCluster map[string]map[types.NamespacedName]struct{}
	// swept are the clusters whose leftovers a sweep found (possibly none)
	// since the engine last forgot them: only theirs are known.
	swept map[string]struct{}
}

// pendingChange is what the next notification reports for one HelmOp.
type pendingChange struct {
	rows      map[string]struct{}
	leftovers bool
}

func newStatusRecord() *statusRecord {
	return &statusRecord{
		rows:     map[string]types.NamespacedName{},
		statuses: map[string]copycontract.Status{},
		leftovers: leftoverState{
			byOp:      map[types.NamespacedName]map[string][]copycontract.Leftover{},
			byCluster: map[string]map[types.NamespacedName]struct{}{},
			swept:     map[string]struct{}{},
		},
		pending: map[types.NamespacedName]*pendingChange{},
	}
}

// accept lets rows of helmOp have a status. The rows a handover adds are
// accepted before the desired set holds them, so that no pass can find a
// row it may not record.
func (r *statusRecord) accept(helmOp types.NamespacedName, rowKeys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range rowKeys {
		r.rows[key] = helmOp
	}
}

// drop forgets rows that are no longer desired and their statuses, without
// a notification (their rows are gone from the view). The rows a handover
// takes away are dropped after the desired set let them go, so that a pass
// that still had them records nothing that stays.
func (r *statusRecord) drop(rowKeys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range rowKeys {
		delete(r.rows, key)
		delete(r.statuses, key)
	}
}

// record stores a row's status. accepted is false, and nothing is stored,
// for a row no longer desired (its HelmOp changed while its cluster was
// being reconciled); changed reports whether the status changed, and the
// row is then reported by the next notification. now is read only when a
// Synced row needs a LastSyncTime.
func (r *statusRecord) record(rowKey string, s copycontract.Status, now func() time.Time) (accepted, changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op, ok := r.rows[rowKey]
	if !ok {
		return false, false
	}
	prev, ok := r.statuses[rowKey]
	if ok && prev.Phase == s.Phase && prev.Message == s.Message && prev.SyncedResourceVersion == s.SyncedResourceVersion {
		return true, false
	}
	if s.LastSyncTime == nil && ok {
		s.LastSyncTime = prev.LastSyncTime
	}
	// A copy found current (after a restart, say) counts as synced now, the
	// first time this process confirms it.
	if s.LastSyncTime == nil && s.Phase == courier.CopyPhaseSynced {
		s.LastSyncTime = nowTime(now())
	}
	r.statuses[rowKey] = s
	r.pendingLocked(op).rows[rowKey] = struct{}{}
	return true, true
}

// status returns a row's last recorded status.
func (r *statusRecord) status(rowKey string) (copycontract.Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.statuses[rowKey]
	return s, ok
}

// forget drops the statuses of rows that stay desired (their Cluster is
// now pulled, and its agent reports them, or another replica delivers to
// it), to be reported by the next notification. It reports whether any was dropped.
func (r *statusRecord) forget(rowKeys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	forgot := false
	for _, key := range rowKeys {
		if _, ok := r.statuses[key]; ok {
			delete(r.statuses, key)
			r.pendingLocked(r.rows[key]).rows[key] = struct{}{}
			forgot = true
		}
	}
	return forgot
}

// leftoversOf returns one HelmOp's leftover copies, sorted.
func (r *statusRecord) leftoversOf(helmOp types.NamespacedName) []copycontract.Leftover {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []copycontract.Leftover
	for _, l := range r.leftovers.byOp[helmOp] {
		out = append(out, l...)
	}
	sortLeftovers(out)
	return out
}

// leftoversIn returns one cluster's leftover copies, by HelmOp then as
// sorted, and whether they are known: false until a sweep of the cluster
// found them.
func (r *statusRecord) leftoversIn(clusterKey string) ([]copycontract.Leftover, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.leftovers.swept[clusterKey]; !ok {
		return nil, false
	}
	out := []copycontract.Leftover{}
	for op := range r.leftovers.byCluster[clusterKey] {
		out = append(out, r.leftovers.byOp[op][clusterKey]...)
	}
	sortLeftovers(out)
	return out, true
}

// swept reports whether a cluster's leftovers are known (leftoversIn).
func (r *statusRecord) swept(clusterKey string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.leftovers.swept[clusterKey]
	return ok
}

// setLeftovers records a cluster's leftover copies (nil forgets the
// cluster) and reports whether they changed; the HelmOps whose leftovers
// changed are reported by the next notification.
func (r *statusRecord) setLeftovers(clusterKey string, left []copycontract.Leftover) bool {
	byOp := map[types.NamespacedName][]copycontract.Leftover{}
	for _, l := range left {
		byOp[l.HelmOp] = append(byOp[l.HelmOp], l)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.leftovers
	if left == nil {
		delete(st.swept, clusterKey)
	} else {
		st.swept[clusterKey] = struct{}{}
	}
	changed := false
	for op := range st.byCluster[clusterKey] {
		if _, ok := byOp[op]; ok {
			continue
		}
		delete(st.byOp[op], clusterKey)
		if len(st.byOp[op]) == 0 {
			delete(st.byOp, op)
		}
		r.pendingLocked(op).leftovers = true
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
		r.pendingLocked(op).leftovers = true
		changed = true
	}
	return changed
}

func (r *statusRecord) pendingLocked(op types.NamespacedName) *pendingChange {
	p := r.pending[op]
	if p == nil {
		p = &pendingChange{rows: map[string]struct{}{}}
		r.pending[op] = p
	}
	return p
}

// takeChanges returns what changed since the last call -- which rows'
// status and which HelmOps' leftovers, by HelmOp in name order -- and
// clears it.
func (r *statusRecord) takeChanges() []copycontract.StatusChange {
	r.mu.Lock()
	pending := r.pending
	r.pending = map[types.NamespacedName]*pendingChange{}
	r.mu.Unlock()
	if len(pending) == 0 {
		return nil
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
	return changes
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
