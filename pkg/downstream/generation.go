package downstream

import (
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
)

// A shared watch set's informers come in generations. The first selects
// Courier's copies with any value of the set's label, as a set of one
// selects its Cluster's; once the set's membership has been quiet for
// settleDelay, and only if it holds copies of Clusters no member reads
// (looked at every settleDelay), the rebuilder narrows the watch to the values its members read (the
// label `in` them). A replica that delivers to some of the
// Clusters on a kube-apiserver then receives, decodes and holds only their
// copies: with 1,000 Clusters on two kube-apiservers shared by three
// replicas, the wide watch was about a fifth of each replica's CPU in a
// change of every source and 25 MB of its heap (docs/benchmarks.md).
//
// A member whose value the narrow generation does not select (a Cluster
// gained in a hand-over) has the set rebuilt after joinDelay, so that
// Clusters joining together cost one list. A new generation is built and
// synced beside the one it replaces, which serves the members meanwhile;
// its events reach members only once it is live, and the members it newly
// covers are then queued (OnChange with nil), for the events dropped
// before. Starting wide keeps a start, when every Cluster joins, to one
// list per connection.
type generation struct {
	values              sets.Set[string] // nil: every value
	inf                 informers
	secrets, configMaps toolscache.Indexer
	live                atomic.Bool // its events reach the members
	stop                chan struct{}
}

// settleDelay is how long a shared set's membership stays unchanged
// before its watch is narrowed; joinDelay how long a rebuild for a member
// the watch does not select waits for others. Variables for tests.
var (
	settleDelay = 10 * time.Second
	joinDelay   = time.Second
)

func (g *generation) covers(value string) bool { return g.values == nil || g.values.Has(value) }

// newGeneration builds (does not start) the informers of the set's copies
// with the label's values (nil: the set's own selector), stopped by stop.
func (w *watchSet) newGeneration(values sets.Set[string], stop chan struct{}) *generation {
	sel := w.base
	if values != nil {
		sel = narrowed(w.base, w.label, values)
	}
	g := &generation{values: values, stop: stop}
	opts := watchOptions{selector: sel.String(), handler: w.ownHandler(g, w.onChange), transform: digestData, indexers: w.indexers}
	g.secrets = g.inf.secrets(w.kube, opts)
	g.configMaps = g.inf.configMaps(w.kube, opts)
	return g
}

// narrowed is base with label's requirement replaced by `label in values`.
func narrowed(base labels.Selector, label string, values sets.Set[string]) labels.Selector {
	reqs, _ := base.Requirements()
	out := labels.NewSelector()
	for _, r := range reqs {
		if r.Key() == label {
			in, err := labels.NewRequirement(label, selection.In, sets.List(values))
			if err != nil {
				return base // a value no selector can name: stay wide
			}
			r = *in
		}
		out = out.Add(r)
	}
	return out
}

func (w *watchSet) secretsNow() toolscache.Indexer    { return w.gen.Load().secrets }
func (w *watchSet) configMapsNow() toolscache.Indexer { return w.gen.Load().configMaps }

// syncedFor reports whether the set's informers hold every copy of the
// members reading value.
func (w *watchSet) syncedFor(value string) bool {
	g := w.gen.Load()
	return g.covers(value) && g.inf.synced() && w.fixed.synced()
}

// changed tells a shared set's rebuilder that its membership changed.
func (w *watchSet) changed() {
	if w.label == "" {
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// values returns the label values the members read.
func (w *watchSet) values() sets.Set[string] {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := sets.New[string]()
	for value := range w.members {
		v.Insert(value)
	}
	return v
}

// rebuild narrows a shared set's watch once its membership is quiet, and
// widens it to a joining member's value, until the set stops; then it
// stops the generation in use.
func (w *watchSet) rebuild() {
	defer close(w.rebuilt)
	defer func() { close(w.gen.Load().stop) }()
	var unsettled settling
	unsettled.set(true) // a new set's membership is still coming
	defer unsettled.set(false)
	settle := time.NewTimer(settleDelay)
	defer settle.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
			unsettled.set(true)
			settle.Reset(settleDelay)
			if w.covered() {
				continue
			}
			select {
			case <-w.stop:
				return
			case <-time.After(joinDelay):
			}
			if !w.swapTo(w.values()) {
				return
			}
		case <-settle.C:
			// Looked at again every settleDelay: other replicas' copies
			// may appear on a quiet set's kube-apiserver later.
			settle.Reset(settleDelay)
			w.settled.Add(1)
			if w.holdsOthers() && !w.swapTo(w.values()) {
				return
			}
			unsettled.set(false)
		}
	}
}

// swapTo swaps in a generation for values unless no member is left (the
// set is stopping). It returns false when the set stopped first.
func (w *watchSet) swapTo(values sets.Set[string]) bool {
	if values.Len() == 0 {
		return true
	}
	return w.swap(values)
}

// settling is whether a shared set counts in watchSetsSettling: from a
// change of its membership until the settle check after it has run (and
// narrowed the watch if it was going to).
type settling bool

func (s *settling) set(v bool) {
	if bool(*s) == v {
		return
	}
	*s = settling(v)
	if v {
		watchSetsSettling.Inc()
	} else {
		watchSetsSettling.Dec()
	}
}

// holdsOthers reports whether the generation in use holds copies of
// Clusters that no member reads. A set whose Clusters are the only ones on
// their kube-apiserver (a fleet of one Cluster per kube-apiserver) never
// holds any, and is never rebuilt: narrowing it would cost a list and buy
// nothing.
func (w *watchSet) holdsOthers() bool {
	g := w.gen.Load()
	members := w.values()
	for _, idx := range []toolscache.Indexer{g.secrets, g.configMaps} {
		for _, v := range idx.ListIndexFuncValues(memberIndex) {
			if !members.Has(v) {
				return true
			}
		}
	}
	return false
}

// covered reports whether the generation in use selects every member.
func (w *watchSet) covered() bool {
	g := w.gen.Load()
	for v := range w.values() {
		if !g.covers(v) {
			return false
		}
	}
	return true
}

// swap builds and syncs a generation for values, puts it in place of the
// one in use, queues the members it newly covers and stops the old one.
// It returns false when the set stopped first.
func (w *watchSet) swap(values sets.Set[string]) bool {
	g := w.newGeneration(values, make(chan struct{}))
	g.inf.start(g.stop)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !g.inf.synced() {
		select {
		case <-w.stop:
			close(g.stop)
			g.inf.wait()
			return false
		case <-tick.C:
		}
	}
	g.live.Store(true)
	old := w.gen.Swap(g)
	for v := range values {
		if !old.covers(v) {
			for _, key := range w.membersOf(v) {
				w.onChange(key, nil)
			}
		}
	}
	close(old.stop)
	old.inf.wait()
	watchRebuilds.Inc()
	return true
}
