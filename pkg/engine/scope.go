package engine

import "sync"

// A whole pass over a Cluster plans every copy the Cluster should hold and
// then sweeps the copies nothing wants. After a change of one source
// listed for 1,000 Clusters that was ten plans, a list of the Cluster's
// copies and a claim check of each, per Cluster, to write one copy: most
// of the engine's CPU in that change (docs/benchmarks.md, session 10).
//
// So each queued Cluster carries a scope: what its next pass must cover.
// Only one kind of change narrows it: new source resourceVersions of rows
// the engine already holds (UpdateDesired). Such a change alters neither
// which copies the Cluster should hold nor anything the other rows are
// judged by, so a pass over just those rows, without the sweep, ends where
// a whole pass would. Everything else -- a HelmOp's rows handed over again
// (SetDesired), a Cluster or a copy changed, the resync, a new leader, a
// retry after a pass that failed -- asks for a whole pass, and a whole
// pass stays owed until a pass takes it. A Cluster queued by anything that
// records no scope gets a whole pass as well, so a path that forgets to
// record one costs work, never a copy.
//
// A scope is always recorded before its Cluster is queued, so the pass the
// queue hands out sees it.

// passScopes is what each queued Cluster's next pass must cover. It has
// its own lock and calls out to nothing while holding it.
type passScopes struct {
	mu     sync.Mutex
	scopes map[string]*passScope // by cluster key
}

// passScope is what a Cluster's next pass must cover.
type passScope struct {
	// whole asks for every row and the sweep.
	whole bool
	// rows are the row keys whose source changed, when not whole.
	rows map[string]struct{}
}

func newPassScopes() *passScopes {
	return &passScopes{scopes: map[string]*passScope{}}
}

// oweWhole records that the next pass over each of clusterKeys must be
// whole.
func (p *passScopes) oweWhole(clusterKeys ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, key := range clusterKeys {
		p.scopes[key] = &passScope{whole: true}
	}
}

// oweRows records that rows of clusterKey have a new source version; a
// whole pass already owed covers them.
func (p *passScopes) oweRows(clusterKey string, rows ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.scopes[clusterKey]
	if s == nil {
		s = &passScope{rows: map[string]struct{}{}}
		p.scopes[clusterKey] = s
	}
	if s.whole {
		return
	}
	for _, row := range rows {
		s.rows[row] = struct{}{}
	}
}

// take returns what the pass starting now over clusterKey must cover and
// clears it, so that what changes during the pass is owed to the next
// one: the rows whose sources changed, or nil for a whole pass.
func (p *passScopes) take(clusterKey string) map[string]struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.scopes[clusterKey]
	delete(p.scopes, clusterKey)
	if s == nil || s.whole {
		return nil
	}
	return s.rows
}

// forget drops what is owed to a Cluster that is gone.
func (p *passScopes) forget(clusterKey string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.scopes, clusterKey)
}

// queueWhole queues clusterKey for a whole pass.
func (e *Engine) queueWhole(clusterKey string) {
	e.scopes.oweWhole(clusterKey)
	e.queue.Add(clusterKey)
}

// onlyRows returns the copies whose row key is in rows, in their order.
func onlyRows(copies []desiredCopy, rows map[string]struct{}) []desiredCopy {
	out := make([]desiredCopy, 0, len(rows))
	for _, c := range copies {
		if _, ok := rows[c.rowKey]; ok {
			out = append(out, c)
		}
	}
	return out
}
