package copyview

import (
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/registry/memstore"
)

// syncHelmOp brings one HelmOp's rows up to date: it computes them, hands
// them to the engine, overlays what the engine recorded, adds the rows of
// its leftover copies, and writes to the store what changed, deleting the
// rows the HelmOp no longer has. A HelmOp that is gone has no rows of its
// own, but the rows of its leftover copies stay while those copies do.
func (c *Controller) syncHelmOp(ctx context.Context, op types.NamespacedName) error {
	obj, err := c.inputs.HelmOps.HelmOps(op.Namespace).Get(op.Name)
	var rows []*courier.DownstreamCopy
	var problems []Problem
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if rows, problems, err = ComputeHelmOp(c.inputs, obj); err != nil {
			return err
		}
	}
	wanted := make(map[string]bool, len(rows))
	for _, r := range rows {
		wanted[rowKey(r)] = true
	}
	var left []*courier.DownstreamCopy
	if c.engine != nil {
		c.engine.SetDesired(op, rows)
	}
	for _, r := range rows {
		if st, ok := c.rowStatus(r); ok {
			overlay(r, st)
		}
	}
	if c.engine != nil {
		left = leftoverRows(wanted, c.engine.Leftovers(op))
	}

	c.mu.Lock()
	st := c.rowsLocked(op)
	c.logNewProblemsLocked(ctx, st, op, problems)
	gone := c.setKeysLocked(op, st, rows, left, true)
	c.stampLocked(rows)
	c.stampLocked(left)
	c.mu.Unlock()

	// New rows first, then the ones that went: a list in between never
	// misses a row the HelmOp has.
	c.store.Upsert(append(rows, left...)...)
	c.store.Delete(gone...)
	return nil
}

// syncLeftovers brings the rows of one HelmOp's leftover copies up to date,
// leaving its other rows alone.
func (c *Controller) syncLeftovers(op types.NamespacedName) {
	if c.engine == nil {
		return
	}
	leftovers := c.engine.Leftovers(op)
	c.mu.Lock()
	st := c.rowsLocked(op)
	left := leftoverRows(st.keys, leftovers)
	gone := c.setKeysLocked(op, st, nil, left, false)
	c.stampLocked(left)
	c.mu.Unlock()

	c.store.Upsert(left...)
	c.store.Delete(gone...)
}

// refreshRows gives the named rows of one HelmOp the engine's current
// status, or for a pulled Cluster its agent's report, from the rows in the
// store: nothing is recomputed, and only rows whose status changed are
// written. Keys that are not (or no longer) the HelmOp's wanted rows are
// skipped.
func (c *Controller) refreshRows(op types.NamespacedName, keys map[string]bool) {
	if len(keys) == 0 {
		return
	}
	c.mu.Lock()
	var mine []string
	if st := c.rows[op]; st != nil {
		for key := range keys {
			if st.keys[key] {
				mine = append(mine, key)
			}
		}
	}
	c.mu.Unlock()
	rows := make([]*courier.DownstreamCopy, 0, len(mine))
	for _, key := range mine {
		ns, name := splitRowKey(key)
		r, ok := c.store.Get(ns, name)
		if !ok {
			continue
		}
		r.Status = baseStatus(r.Namespace, r.Spec)
		if st, ok := c.rowStatus(r); ok {
			overlay(r, st)
		}
		rows = append(rows, r)
	}
	c.mu.Lock()
	c.stampLocked(rows)
	c.mu.Unlock()
	c.store.Upsert(rows...)
}

// rowsLocked returns what the view knows of a HelmOp's rows, creating the
// record if needed.
func (c *Controller) rowsLocked(op types.NamespacedName) *helmOpRows {
	st := c.rows[op]
	if st == nil {
		st = &helmOpRows{keys: map[string]bool{}, problems: map[string]bool{}}
		c.rows[op] = st
	}
	return st
}

// setKeysLocked records a HelmOp's row keys after a sync: its wanted rows
// (only when all is true; otherwise the wanted keys stay) and the rows of
// its leftover copies. It returns the keys of the rows it had and no
// longer has, and forgets their phase history.
func (c *Controller) setKeysLocked(op types.NamespacedName, st *helmOpRows, wanted, left []*courier.DownstreamCopy, all bool) []memstore.Key {
	next := make(map[string]bool, len(wanted)+len(left))
	if !all {
		for key, isWanted := range st.keys {
			if isWanted {
				next[key] = true
			}
		}
	}
	for _, r := range wanted {
		next[rowKey(r)] = true
	}
	c.indexRowsLocked(op, wanted)
	for _, r := range left {
		next[rowKey(r)] = false
	}
	var gone []memstore.Key
	for key := range st.keys {
		if _, ok := next[key]; !ok {
			ns, name := splitRowKey(key)
			gone = append(gone, memstore.Key{Namespace: ns, Name: name})
			delete(c.since, key)
			c.unindexRowLocked(key)
		}
	}
	st.keys = next
	if len(next) == 0 && len(st.problems) == 0 {
		delete(c.rows, op)
	}
	return gone
}

// stampLocked sets each row's Ready condition LastTransitionTime to when
// the row entered its current phase.
func (c *Controller) stampLocked(rows []*courier.DownstreamCopy) {
	now := metav1.NewTime(c.now().Truncate(time.Second))
	for _, r := range rows {
		key := rowKey(r)
		s, ok := c.since[key]
		if !ok || s.phase != r.Status.Phase {
			s = phaseSince{phase: r.Status.Phase, at: now}
			c.since[key] = s
		}
		for i := range r.Status.Conditions {
			r.Status.Conditions[i].LastTransitionTime = s.at
		}
		r.CreationTimestamp = now
	}
}

// logNewProblemsLocked logs each targeting problem of a HelmOp once, when
// it first appears, rather than on every sync.
func (c *Controller) logNewProblemsLocked(ctx context.Context, st *helmOpRows, op types.NamespacedName, problems []Problem) {
	current := make(map[string]bool, len(problems))
	for _, p := range problems {
		key := p.Err.Error()
		current[key] = true
		if !st.problems[key] {
			klog.FromContext(ctx).Info("HelmOp target matches no cluster", "helmop", op, "problem", key)
		}
	}
	st.problems = current
}

func rowKey(r *courier.DownstreamCopy) string { return r.Namespace + "/" + r.Name }

func splitRowKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}
