package engine

import (
	"sync"

	"github.com/courier-dev/courier/pkg/downstream"
)

// currentCopies remembers, per Cluster, which copies a pass found current:
// the copy's resourceVersion downstream and everything of the row the copy
// is built from. A later pass that finds the same copy at the same
// resourceVersion, wanted by the same row at the same source version,
// knows the answer without building the desired object and comparing it
// again.
//
// That is most of a pass: when one source listed for 1,000 Clusters
// changes, each Cluster's pass writes one copy and finds its other nine
// current, and building those nine (labels, annotations, two hashes, a
// clone of the data) cost more CPU than the write (docs/benchmarks.md).
//
// Two things are remembered: a copy Courier owns that a pass judged
// current from the informer's cache, and a copy Courier has just written,
// at the resourceVersion the server gave it -- after a change of every
// source the next pass finds all ten copies that way. Anything that could
// change the answer misses: an edit downstream changes the copy's
// resourceVersion, a source change the row's source version, a new
// kubeconfig the client. A live read, Fleet's copies and every problem are
// decided afresh each pass.
type currentCopies struct {
	mu        sync.Mutex
	byCluster map[string]*clusterCurrent
}

// clusterCurrent is one Cluster's remembered copies, valid only for the
// client they were read with: resourceVersions of another kube-apiserver
// mean nothing.
type clusterCurrent struct {
	client *downstream.Client
	rows   map[string]currentCopy // by row key
}

// currentCopy is what a copy was found current for.
type currentCopy struct {
	copyRV, sourceRV, targetNS string
	keep                       bool
}

func newCurrentCopies() *currentCopies {
	return &currentCopies{byCluster: map[string]*clusterCurrent{}}
}

func currentFor(c desiredCopy, copyRV string) currentCopy {
	return currentCopy{copyRV: copyRV, sourceRV: c.sourceRV, targetNS: c.targetNS, keep: c.keep}
}

// holds reports whether the copy of row c, found at copyRV in client's
// cluster, was judged current for exactly this row.
func (m *currentCopies) holds(client *downstream.Client, c desiredCopy, copyRV string) bool {
	if copyRV == "" || c.sourceRV == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cc, ok := m.byCluster[client.Key]
	if !ok || cc.client != client {
		return false
	}
	got, ok := cc.rows[c.rowKey]
	return ok && got == currentFor(c, copyRV)
}

// remember records that the copy of row c, at copyRV in client's cluster,
// is current.
func (m *currentCopies) remember(client *downstream.Client, c desiredCopy, copyRV string) {
	if copyRV == "" || c.sourceRV == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cc, ok := m.byCluster[client.Key]
	if !ok || cc.client != client {
		cc = &clusterCurrent{client: client, rows: map[string]currentCopy{}}
		m.byCluster[client.Key] = cc
	}
	cc.rows[c.rowKey] = currentFor(c, copyRV)
}

// retain drops what is remembered for rows of the cluster that copies no
// longer names once there are more entries than rows, so that after each
// pass a Cluster holds no more entries than it has rows. While no row went
// away it costs nothing.
func (m *currentCopies) retain(clusterKey string, copies []desiredCopy) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cc, ok := m.byCluster[clusterKey]
	if !ok || len(cc.rows) <= len(copies) {
		return
	}
	wanted := make(map[string]currentCopy, len(copies))
	for _, c := range copies {
		if v, ok := cc.rows[c.rowKey]; ok {
			wanted[c.rowKey] = v
		}
	}
	cc.rows = wanted
}

// forget drops everything remembered for a cluster.
func (m *currentCopies) forget(clusterKey string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byCluster, clusterKey)
}
