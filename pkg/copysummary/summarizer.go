package copysummary

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// DefaultWindow is the default coalescing window: a summary is recomputed
// at most once per window however many of its rows change.
const DefaultWindow = 250 * time.Millisecond

// retryDelay is how long Run waits before watching the rows again after
// the store refused a watch.
const retryDelay = time.Second

// Summarizer keeps a store of summaries in step with a store of rows.
//
// It follows the rows with a watch of its own on their store (a watch-list:
// every row, then the initial-events-end bookmark, then each change) and
// keeps them indexed by owner, as Rows holding no data. A row event marks
// its owner dirty and costs nothing else; dirty owners are recomputed from
// their own rows only (Compute), all at once, at most once per window: a
// flush happens when an owner is dirty and at least a window has passed
// since the last one. So a summary's watcher sees at most one event per
// window, plus the first: a burst of row changes that lasts D is at most
// 1 + ceil(D/window) summary events, whatever the number of rows (the
// store sends no event for a recomputed summary that did not change).
//
// Summaries nobody here reads cost little: while the summary store has no
// watcher, dirty owners are recomputed at most once per idle window
// (Options.IdleWindow), and every read -- get, list, or the start of a
// watch -- first calls Sync, which recomputes them at once (demand.go).
//
// Nothing flushes until the initial events of a watch have all arrived, so a
// summary never shows part of a relist; nor, once a flush falls due, until
// the events seen reach the row store's version at that moment, and then
// at exactly that event, so a summary never shows part of one change of
// several rows (an Upsert is atomic for its readers, but its events reach
// a watcher one by one). A watch the row store closes (a
// watcher that fell behind) is resumed from the last resource version seen;
// when the store's history no longer reaches back to it, the Summarizer
// lists again and forgets the rows the new list lacks.
type Summarizer struct {
	rows       *memstore.Store[*courier.DownstreamCopy]
	out        *memstore.Store[*courier.DownstreamCopySummary]
	window     time.Duration
	idleWindow time.Duration
	watched    func() bool
	now        func() time.Time
	synced     atomic.Bool
	// syncs carries Sync's requests to the loop: each is closed once the
	// summaries reflect every row change made before it was sent.
	syncs chan chan struct{}

	// What the loop alone touches.
	owners    map[memstore.Key]*ownerRows   // summary key → its rows
	rowOwner  map[memstore.Key]memstore.Key // row key → summary key
	dirty     map[memstore.Key]struct{}
	ready     map[memstore.Key]metav1.Condition // the Ready condition last written
	lastFlush time.Time
	waiters   []chan struct{} // Sync requests the next flush answers
	// recomputed counts the owners recomputed, relists the watch-lists
	// after the first, deferred the times dirty owners were left for the
	// idle window, for tests.
	recomputed, relists, deferred atomic.Int64
}

// Options configure a Summarizer.
type Options struct {
	// Window is the coalescing window; DefaultWindow when zero.
	Window time.Duration
	// IdleWindow is the coalescing window while nobody watches the
	// summaries; DefaultIdleWindow when zero, never shorter than Window.
	IdleWindow time.Duration
	// Watched says whether someone watches the summaries; by default,
	// whether the summary store has a watcher.
	Watched func() bool
	// Now is the clock of the conditions' lastTransitionTime; time.Now when nil.
	Now func() time.Time
}

// New returns a Summarizer that writes into out the summaries of the rows
// in rows. Nothing else should write into out.
func New(rows *memstore.Store[*courier.DownstreamCopy], out *memstore.Store[*courier.DownstreamCopySummary], o Options) *Summarizer {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.IdleWindow <= 0 {
		o.IdleWindow = DefaultIdleWindow
	}
	if o.Watched == nil {
		o.Watched = func() bool { return out.Watchers() > 0 }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Summarizer{
		rows: rows, out: out, window: o.Window, idleWindow: max(o.IdleWindow, o.Window), watched: o.Watched, now: o.Now,
		syncs:    make(chan chan struct{}),
		owners:   map[memstore.Key]*ownerRows{},
		rowOwner: map[memstore.Key]memstore.Key{},
		dirty:    map[memstore.Key]struct{}{},
		ready:    map[memstore.Key]metav1.Condition{},
	}
}

// HasSynced reports whether the summaries have been computed from every
// row once.
func (s *Summarizer) HasSynced() bool { return s.synced.Load() }

// Run follows the rows until ctx is done.
func (s *Summarizer) Run(ctx context.Context) {
	log := klog.FromContext(ctx)
	rv := "" // the last row resource version seen; "" to list
	for ctx.Err() == nil {
		w, err := s.watch(ctx, rv)
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			log.V(2).Info("Row history too short to resume; listing the rows again", "resourceVersion", rv)
			rv = ""
			s.relists.Add(1)
			continue
		}
		if err != nil {
			log.Error(err, "Watching the rows")
			select {
			case <-ctx.Done():
			case <-time.After(retryDelay):
			}
			continue
		}
		rv = s.follow(ctx, w, rv)
		w.Stop()
	}
}

// watch starts a watch of the rows: a watch-list when rv is "", the changes
// after rv otherwise.
func (s *Summarizer) watch(ctx context.Context, rv string) (watch.Interface, error) {
	opts := &metainternalversion.ListOptions{ResourceVersion: rv}
	if rv == "" {
		yes := true
		opts.SendInitialEvents, opts.AllowWatchBookmarks = &yes, true
	}
	// Shared: apply only reads each row (RowOf), so it takes the stored
	// rows rather than a deep copy of every row change.
	return s.rows.WatchShared(ctx, "", nil, opts, func() *courier.DownstreamCopy { return &courier.DownstreamCopy{} })
}

// follow applies w's events and flushes dirty owners until w ends or ctx is
// done, and returns the last resource version seen. A watch-list (rv "")
// first collects every row and forgets the ones it did not see.
func (s *Summarizer) follow(ctx context.Context, w watch.Interface, rv string) string {
	var seen map[memstore.Key]struct{}
	if rv == "" {
		seen = map[memstore.Key]struct{}{}
	}
	var timer *time.Timer
	var fire <-chan time.Time
	// target is, once a flush fell due, the row store's resource version
	// then: the flush waits until the watch has delivered every event up
	// to it, and happens at that event. The store applies each Upsert or
	// Delete under one lock, so its version is always the end of one, and
	// the summaries are computed from a state the rows really had, never
	// from part of one change of several rows. The target does not move,
	// so a stream of later writes cannot hold the flush back.
	var target uint64
	due := len(s.waiters) > 0 // Sync requests a watch that ended left
	if due {
		target = s.rows.ResourceVersion()
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			if ev.Type == watch.Error {
				klog.FromContext(ctx).V(2).Info("Row watch ended with an error", "error", apierrors.FromObject(ev.Object))
				return ""
			}
			rv = s.apply(ev, rv, &seen)
		case <-fire:
			fire = nil
			if s.delay(time.Now()) == 0 {
				due, target = true, s.rows.ResourceVersion()
			} else {
				s.deferred.Add(1)
			}
		case req := <-s.syncs:
			// Every row change made before the request counts: the
			// target moves up to the store's version now.
			s.waiters = append(s.waiters, req)
			due, target = true, s.rows.ResourceVersion()
		}
		if due && seen == nil && reached(rv, target) {
			s.flush()
			due = false
		}
		if fire == nil && !due && seen == nil && len(s.dirty) > 0 {
			timer = time.NewTimer(s.delay(time.Now()))
			fire = timer.C
		}
	}
}

// reached says whether the last row event seen (rv) is at or past target.
func reached(rv string, target uint64) bool {
	seen, err := strconv.ParseUint(rv, 10, 64)
	return err != nil || seen >= target
}

// apply records one row event and returns the resource version it carries.
// While seen is set (a watch-list's initial events) it records the rows
// seen; the initial-events-end bookmark then forgets the others and sets
// seen to nil.
func (s *Summarizer) apply(ev watch.Event, rv string, seen *map[memstore.Key]struct{}) string {
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return rv
	}
	if v := m.GetResourceVersion(); v != "" {
		rv = v
	}
	switch ev.Type {
	case watch.Bookmark:
		if *seen != nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			s.forgetUnseen(*seen)
			*seen = nil
			s.synced.Store(true)
		}
	case watch.Added, watch.Modified:
		dc, ok := ev.Object.(*courier.DownstreamCopy)
		if !ok {
			return rv
		}
		k := memstore.KeyOf(dc)
		if *seen != nil {
			(*seen)[k] = struct{}{}
		}
		s.put(k, RowOf(dc))
	case watch.Deleted:
		s.remove(memstore.KeyOf(m))
	}
	return rv
}

// put indexes a row under its owner, and marks the owner dirty when what
// the summary reads of the row changed.
func (s *Summarizer) put(k memstore.Key, r Row) {
	owner := KeyOf(r)
	if old, ok := s.rowOwner[k]; ok && old != owner {
		s.remove(k)
	}
	rows := s.owners[owner]
	if rows == nil {
		rows = &ownerRows{index: map[string]int{}}
		s.owners[owner] = rows
	}
	if !rows.put(r) {
		return
	}
	s.rowOwner[k] = owner
	s.dirty[owner] = struct{}{}
}

// remove forgets a row and marks its owner dirty.
func (s *Summarizer) remove(k memstore.Key) {
	owner, ok := s.rowOwner[k]
	if !ok {
		return
	}
	delete(s.rowOwner, k)
	if rows := s.owners[owner]; rows != nil {
		rows.remove(k.Name)
		if len(rows.rows) == 0 {
			delete(s.owners, owner)
		}
	}
	s.dirty[owner] = struct{}{}
}

// ownerRows are one owner's rows, kept in a slice that Compute reads as
// it is. A profile of a change of every source at N=1,000 showed flush
// spending two thirds of its time copying 10,000 rows out of a map into a
// slice, at every window, and the garbage collector scanning the copies.
type ownerRows struct {
	index map[string]int // row name → position in rows
	rows  []Row
}

// put stores r, and reports whether it changed what was stored.
func (o *ownerRows) put(r Row) bool {
	if i, ok := o.index[r.Name]; ok {
		if o.rows[i] == r {
			return false
		}
		o.rows[i] = r
		return true
	}
	o.index[r.Name] = len(o.rows)
	o.rows = append(o.rows, r)
	return true
}

// remove forgets the row named name: the last row takes its place.
func (o *ownerRows) remove(name string) {
	i, ok := o.index[name]
	if !ok {
		return
	}
	last := len(o.rows) - 1
	if i != last {
		o.rows[i] = o.rows[last]
		o.index[o.rows[i].Name] = i
	}
	o.rows[last] = Row{} // lets its strings go
	o.rows = o.rows[:last]
	delete(o.index, name)
}

// forgetUnseen forgets every row a watch-list did not send.
func (s *Summarizer) forgetUnseen(seen map[memstore.Key]struct{}) {
	for k := range s.rowOwner {
		if _, ok := seen[k]; !ok {
			s.remove(k)
		}
	}
}

// flush recomputes every dirty owner from its rows and writes the results
// at once: summaries of owners with rows upserted, the others deleted.
func (s *Summarizer) flush() {
	now := metav1.NewTime(s.now()).Rfc3339Copy()
	var upserts []*courier.DownstreamCopySummary
	var deletes []memstore.Key
	for key := range s.dirty {
		s.recomputed.Add(1)
		var rows []Row
		if o := s.owners[key]; o != nil {
			rows = o.rows
		}
		sum := Compute(rows)
		if sum == nil {
			deletes = append(deletes, key)
			delete(s.ready, key)
			continue
		}
		stampTransition(&sum.Status.Conditions[0], s.ready[key], now)
		s.ready[key] = sum.Status.Conditions[0]
		upserts = append(upserts, sum)
	}
	clear(s.dirty)
	s.out.Upsert(upserts...)
	s.out.Delete(deletes...)
	s.lastFlush = time.Now()
	for _, w := range s.waiters {
		close(w)
	}
	s.waiters = nil
}

// stampTransition keeps the previous lastTransitionTime of a condition
// whose status did not change, and sets now otherwise.
func stampTransition(c *metav1.Condition, prev metav1.Condition, now metav1.Time) {
	if prev.Type == c.Type && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
		return
	}
	c.LastTransitionTime = now
}
