package copyview

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/rowstatus"
	"github.com/courier-dev/courier/pkg/targeting"
)

// syncOwner brings one HelmOp's rows up to date: it computes them, hands
// them to the engine, overlays what the engine recorded, adds the rows of
// its leftover copies, and writes to the store what changed, deleting the
// rows the HelmOp no longer has. A HelmOp that is gone has no rows of its
// own, but the rows of its leftover copies stay while those copies do.
func (c *Controller) syncOwner(ctx context.Context, op types.NamespacedName) error {
	o, err := c.getOwner(op)
	if err != nil {
		return err
	}
	var rows []*courier.DownstreamCopy
	var problems []Problem
	if o != nil {
		if rows, problems, err = computeOwner(ctx, c.inputs, o); err != nil {
			return err
		}
	}
	wanted := make(map[string]bool, len(rows))
	for _, r := range rows {
		wanted[rowKey(r)] = true
	}
	var left []*courier.DownstreamCopy
	if c.engine != nil {
		c.engine.SetDesired(op, rows) // Denied ones too: the engine removes their copies and looks for Fleet's
	}
	for _, r := range rows {
		c.composeRow(r)
	}
	if c.engine != nil {
		left = leftoverRows(wanted, c.leftovers(op))
	}

	c.mu.Lock()
	st := c.rowsLocked(op)
	fresh, warn := c.newProblemsLocked(st, problems)
	gone := c.setKeysLocked(op, st, rows, left, true)
	c.stampLocked(rows)
	c.stampLocked(left)
	c.mu.Unlock()
	c.reportProblems(ctx, op, o, fresh, warn)

	// New rows first, then the ones that went: a list in between never
	// misses a row the HelmOp has. Every row here was built by this sync
	// (rowFor, leftoverRow) and is not touched after: the store keeps
	// them as they are, with no deep copy.
	c.store.UpsertOwned(append(rows, left...)...)
	c.store.Delete(gone...)
	return nil
}

// syncLeftovers brings the rows of one HelmOp's leftover copies up to date,
// leaving its other rows alone.
func (c *Controller) syncLeftovers(op types.NamespacedName) {
	if c.engine == nil {
		return
	}
	leftovers := c.leftovers(op)
	c.mu.Lock()
	st := c.rowsLocked(op)
	left := leftoverRows(st.keys, leftovers)
	gone := c.setKeysLocked(op, st, nil, left, false)
	c.stampLocked(left)
	c.mu.Unlock()

	c.store.UpsertOwned(left...) // leftoverRow's, built here
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
	full := false
	for _, key := range mine {
		r, ok := c.restatedRow(key)
		if !ok {
			if c.isDenied(key) {
				full = true // its base is the export verdict's: computed afresh
			}
			continue
		}
		c.composeRow(r)
		rows = append(rows, r)
	}
	c.mu.Lock()
	c.stampLocked(rows)
	c.mu.Unlock()
	c.store.UpsertOwned(rows...) // restatedRow's: the store keeps them as they are
	if full {
		c.enqueue(op)
	}
}

// isDenied reports whether the row stored under key is Denied (and so
// not delivered): what its deliverer found is shown by a full sync.
func (c *Controller) isDenied(key string) bool {
	ns, name := copycontract.SplitKey(key)
	stored, ok := c.store.Peek(ns, name)
	return ok && !courier.Delivered(stored.Labels) && stored.Status.Phase == courier.CopyPhaseDenied
}

// restatedRow returns a new row for the row stored under key: the stored
// one's metadata and spec (shared with the store, and so never to be
// changed in place), a status of its own from rowstatus.Base, or for a
// Denied row from its source's verdict (restatedDenied). ok is false when
// no such row is stored, or it is a leftover copy's. UpsertOwned keeps it
// as it is: its caller must not change it after.
func (c *Controller) restatedRow(key string) (*courier.DownstreamCopy, bool) {
	ns, name := copycontract.SplitKey(key)
	stored, ok := c.store.Peek(ns, name)
	if !ok {
		return nil, false
	}
	if !courier.Delivered(stored.Labels) {
		if stored.Status.Phase != courier.CopyPhaseDenied {
			return nil, false // a leftover copy's row: syncLeftovers'
		}
		return c.restatedDenied(stored)
	}
	r := *stored
	r.Status = rowstatus.Base(r.Namespace, r.Spec)
	return &r, true
}

// rowsLocked returns what the view knows of a HelmOp's rows, creating the
// record if needed.
func (c *Controller) rowsLocked(op types.NamespacedName) *helmOpRows {
	st := c.rows[op]
	if st == nil {
		st = &helmOpRows{keys: map[string]bool{}, problems: map[string]bool{}, warned: map[string]bool{}}
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
			ns, name := copycontract.SplitKey(key)
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

// newProblemsLocked records a HelmOp's current targeting problems. It
// returns those that were not there at its last sync, to be logged (each
// once, when it appears, rather than on every sync), and those to record
// an Event for: while this replica leads (and has a recorder), each it has
// not recorded one for yet. Reading leading under c.mu orders it with
// SetLeading's look at the problems: a problem not recorded because the
// replica did not lead yet is seen there and its HelmOp synced again.
func (c *Controller) newProblemsLocked(st *helmOpRows, problems []Problem) (fresh, warn []Problem) {
	recording := c.recorder != nil && c.leading.Load()
	current := make(map[string]bool, len(problems))
	warned := map[string]bool{}
	for _, p := range problems {
		key := p.Err.Error()
		if current[key] {
			continue
		}
		current[key] = true
		if !st.problems[key] {
			fresh = append(fresh, p)
		}
		switch {
		case st.warned[key]:
			warned[key] = true
		case recording:
			warned[key] = true
			warn = append(warn, p)
		}
	}
	st.problems, st.warned = current, warned
	return fresh, warn
}

// Reasons of the Warning Events recorded on a HelmOp for its targeting
// problems (docs/troubleshooting.md).
const (
	// ReasonInvalidTarget: a target's clusterSelector or
	// clusterGroupSelector, or the spec.selector of a ClusterGroup it
	// consults, does not parse.
	ReasonInvalidTarget = "InvalidTarget"
	// ReasonTargetWithoutCriteria: a target sets none of clusterName,
	// clusterSelector, clusterGroup and clusterGroupSelector (Fleet's rule:
	// it matches no cluster).
	ReasonTargetWithoutCriteria = "TargetWithoutCriteria"
	// ReasonExportDenied: the HelmOp lists a source that is never exported
	// (docs/design.md#export-safety); its rows are Denied.
	ReasonExportDenied = "ExportDenied"
)

// maxEventMessage caps a problem's Event message: a selector's error
// quotes the value that did not parse, which may be long.
const maxEventMessage = 1024

// reportProblems logs the targeting problems that newly appeared on a
// HelmOp (fresh) and records a Warning Event on it for each of warn: a
// target whose selector does not parse has no row to show it on, and an
// Event is what `kubectl describe helmop` and `kubectl get events` show.
// The message names the target and the problem (a selector's parse
// error); selectors are not secret. op is nil when the HelmOp is gone (it
// then has no problems).
func (c *Controller) reportProblems(ctx context.Context, key types.NamespacedName, o *owner, fresh, warn []Problem) {
	for _, p := range fresh {
		if _, denied := p.Err.(deniedSource); denied {
			klog.FromContext(ctx).Info("Owner lists a source that is never exported", "owner", key, "problem", p.Err.Error())
			continue
		}
		klog.FromContext(ctx).Info("Owner's target matches no cluster", "owner", key, "problem", p.Err.Error())
	}
	if o == nil {
		return
	}
	for _, p := range warn {
		// ErrNoCriteria says already that the target matches no cluster.
		msg, reason := p.Err.Error(), ReasonTargetWithoutCriteria
		if _, denied := p.Err.(deniedSource); denied {
			reason = ReasonExportDenied
		} else if !errors.Is(p.Err, targeting.ErrNoCriteria) {
			reason, msg = ReasonInvalidTarget, msg+"; the target matches no cluster"
		}
		c.recorder.Event(o.ref, corev1.EventTypeWarning, reason, truncate(msg, maxEventMessage))
	}
}

// truncate cuts s to at most n bytes, on a rune boundary, ending in "..."
// when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func rowKey(r *courier.DownstreamCopy) string { return r.Namespace + "/" + r.Name }
