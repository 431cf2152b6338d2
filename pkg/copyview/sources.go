package copyview

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// A source that changes (a new resourceVersion of a Secret or ConfigMap
// that existed and still exists) changes one field of the rows that name
// it, and nothing else: targeting, destinations and every other row of its
// HelmOps stay as they are. syncSources updates just those rows, and hands
// just them to the engine (Engine.UpdateDesired).
//
// That is what lets a change reach the engine in time proportional to the
// rows it touches: in `make bench` at 1,000 Clusters the first copy of a
// one-source change was written 217-255 ms after the source's update,
// while the view recomputed the HelmOp's 10,000 rows and the engine diffed
// them before the first Cluster was queued. Anything else -- a source that
// appears or goes, a row the view cannot find, an engine that cannot take
// the rows -- falls back to a full sync of the HelmOp, as before.

// enqueueSource asks for the rows of op that name a changed source
// (ListedKey) to be brought up to date; a full sync asked for meanwhile
// covers it.
func (c *Controller) enqueueSource(op types.NamespacedName, listed string) {
	c.mu.Lock()
	c.workLocked(op).sources[listed] = true
	c.mu.Unlock()
	c.queue.Add(op.String())
}

// syncSources gives op's rows that name the changed sources their
// sources' current resourceVersion, hands those rows to the engine and
// writes them to the store. It returns false, having written nothing, when
// a full sync is needed instead: also when a source's export verdict may
// have changed (a Denied row, or a new version that is denied), since that
// changes what the engine is handed.
func (c *Controller) syncSources(ctx context.Context, op types.NamespacedName, sources map[string]bool) bool {
	c.mu.Lock()
	if c.rows[op] == nil {
		c.mu.Unlock()
		return false // never synced: nothing to update in place
	}
	var keys []string
	for listed := range sources {
		for key, owner := range c.bySource.rows[listed] {
			if owner == op {
				keys = append(keys, key)
			}
		}
	}
	c.mu.Unlock()
	slices.Sort(keys) // rows in name order, as a full sync writes them

	versions := make(map[string]string, len(sources))
	for listed := range sources {
		kind, m, ok := c.source(listed)
		if !ok {
			return false // gone meanwhile: its rows become SourceMissing
		}
		if v, err := sourceVerdict(ctx, c.inputs, kind, m); err != nil || v.Denied() {
			return false
		}
		versions[listed] = m.GetResourceVersion()
	}
	rows := make([]*courier.DownstreamCopy, 0, len(keys))
	for _, key := range keys {
		ns, name := copycontract.SplitKey(key)
		stored, ok := c.store.Peek(ns, name)
		if !ok || !courier.Delivered(stored.Labels) {
			return false // a Denied row may be allowed now
		}
		was := stored.Spec.Source.ResourceVersion
		rv := versions[ListedKey(stored.Namespace, stored.Spec.Source.Kind, stored.Spec.Source.Name)]
		switch {
		case was == "":
			return false // the row says its source is missing: its phase changes
		case was == rv:
			continue
		}
		r := *stored // the spec is values; the metadata stays the store's, unchanged
		r.Spec.Source.ResourceVersion = rv
		r.Status = rowstatus.Base(r.Namespace, r.Spec)
		rows = append(rows, &r)
	}
	if len(rows) == 0 {
		return true
	}
	// The engine writes to no pulled Cluster (its agent does, docs/design.md#pull-delivery),
	// so it is handed only pushed Clusters' rows: at 10,000 pulled
	// Clusters the rest was 10,000 copies to update and 10,000 Clusters
	// queued for passes that do nothing, on every replica. A Cluster that
	// turns pushed has its owners synced whole (clusterEvents), which
	// hands the engine its rows as they are then. Composing first looks
	// each Cluster up once; UpdateDesired changes no status it reads.
	pushed := rows[:0:0]
	for _, r := range rows {
		if !c.composeRow(r) {
			pushed = append(pushed, r)
		}
	}
	if c.engine != nil && len(pushed) > 0 && !c.engine.UpdateDesired(op, pushed) {
		return false
	}
	c.mu.Lock()
	c.stampLocked(rows)
	c.mu.Unlock()
	c.store.UpsertOwned(rows...) // each a shallow copy of a stored row
	return true
}

// source returns the kind and metadata of a source (ListedKey) from the
// metadata informers, and false when it does not exist.
func (c *Controller) source(listed string) (string, metav1.Object, bool) {
	parts := strings.SplitN(listed, "/", 3)
	if len(parts) != 3 {
		return "", nil, false
	}
	kind, lister := "Secret", c.inputs.Secrets
	if parts[1] == "configmap" {
		kind, lister = "ConfigMap", c.inputs.ConfigMaps
	}
	obj, err := lister.ByNamespace(parts[0]).Get(parts[2])
	if err != nil {
		return "", nil, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", nil, false
	}
	return kind, m, true
}
