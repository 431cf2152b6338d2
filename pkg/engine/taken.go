package engine

import "sync"

// takenNames remembers, per Cluster, the rows whose copy's name the last
// live read found held by an object Courier may not write there: one it
// does not own, another HelmOp's, or Fleet's copy. createUnread decides
// from it, never from the row's recorded status: a new copy is created
// without a read only where nothing observed says the name is taken.
//
// It is learnt from live reads only (planCopy, createFoundExisting, an
// update that found the copy replaced) and forgotten when a live read
// finds the name free or Courier's own. A stale "taken" costs one GET; a
// name taken since the last look makes the create fail with
// AlreadyExists, and the copy is read then (createFoundExisting). Entries
// are kept per row and destination namespace: a row moved to another
// namespace has not been looked at there. It has its own lock and calls
// out to nothing while holding it.
type takenNames struct {
	mu        sync.Mutex
	byCluster map[string]map[string]string // cluster key -> row key -> destination namespace
}

func newTakenNames() *takenNames {
	return &takenNames{byCluster: map[string]map[string]string{}}
}

// observe records what a live read of copy c's name in clusterKey found:
// taken is true when an object Courier may not write holds it.
func (t *takenNames) observe(clusterKey string, c desiredCopy, taken bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rows := t.byCluster[clusterKey]
	if !taken {
		delete(rows, c.rowKey)
		if len(rows) == 0 {
			delete(t.byCluster, clusterKey)
		}
		return
	}
	if rows == nil {
		rows = map[string]string{}
		t.byCluster[clusterKey] = rows
	}
	rows[c.rowKey] = c.targetNS
}

// taken reports whether the last live read of copy c's name in clusterKey
// found an object Courier may not write there.
func (t *takenNames) taken(clusterKey string, c desiredCopy) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns, ok := t.byCluster[clusterKey][c.rowKey]
	return ok && ns == c.targetNS
}

// retain drops what is known of rows of clusterKey that copies no longer
// names.
func (t *takenNames) retain(clusterKey string, copies []desiredCopy) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rows := t.byCluster[clusterKey]
	if len(rows) == 0 {
		return
	}
	wanted := make(map[string]bool, len(copies))
	for _, c := range copies {
		wanted[c.rowKey] = true
	}
	for key := range rows {
		if !wanted[key] {
			delete(rows, key)
		}
	}
	if len(rows) == 0 {
		delete(t.byCluster, clusterKey)
	}
}

// forget drops everything known of a Cluster.
func (t *takenNames) forget(clusterKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byCluster, clusterKey)
}
