package memstore

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/watch"
	apistorage "k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/klog/v2"
)

// Watch starts a watch on the objects in namespace (all namespaces when
// empty) for which match returns true (all when match is nil). newEmpty
// returns an empty object of the resource's type; it carries the
// initial-events-end bookmark and may only be nil when opts does not ask for
// one.
//
// Where the watch starts follows the kube-apiserver's watch cache:
//   - sendInitialEvents=true (watch-list): an Added event for every current
//     object, then, if allowWatchBookmarks, a Bookmark whose object is
//     newEmpty() with the current resource version and the annotation
//     k8s.io/initial-events-end: "true". A resourceVersion newer than the
//     current one gets 410 Gone.
//   - sendInitialEvents unset and resourceVersion "" or "0": an Added event
//     for every current object (the legacy behaviour), then changes.
//   - sendInitialEvents=false and resourceVersion "" or "0": changes from now.
//   - resourceVersion N: the changes after N. If the history no longer holds
//     all of them, or N is newer than the current version, 410 Gone, and a
//     client relists.
//
// An object that starts to match is sent as Added, one that stops matching
// as Deleted (its last matching state with the resource version of the
// change), as the watch cache does. Every event holds a copy of its own: a deep
// copy, or what the store's WithEventCopy makes.
//
// Writers never wait for a watcher. Events go straight into the result
// channel while it has room (so they can be read as soon as the write
// returns); beyond that they wait in a queue of the watcher's own, which
// holds pointers to stored objects and is copied into the channel as the
// client reads. A watcher is closed as too slow only when more events wait
// for it than the store's watch limit (see Store) beyond its initial events:
// its result channel is closed once the events already waiting have been
// delivered, and its client watches again from the last resource version it
// saw. The watch ends, and its result channel is closed, on Stop or when ctx
// is done.
func (s *Store[T]) Watch(ctx context.Context, namespace string, match func(T) bool, opts *metainternalversion.ListOptions, newEmpty func() T) (watch.Interface, error) {
	return s.watch(ctx, namespace, nil, false, match, opts, newEmpty)
}

// WatchShared is Watch for an in-process consumer that only reads what it
// is sent: an Added or Modified event holds the stored object itself,
// which the store never modifies, not a copy of its own (a Deleted event
// still holds a copy, which carries the deletion's resource version). The
// consumer must not change an event's object nor anything it points to.
// The summarizer reads every row change on every replica: a deep copy per
// row for it alone was a twentieth of a replica's CPU in a source change
// at 2,000 pulled Clusters (docs/benchmarks.md).
func (s *Store[T]) WatchShared(ctx context.Context, namespace string, match func(T) bool, opts *metainternalversion.ListOptions, newEmpty func() T) (watch.Interface, error) {
	return s.watch(ctx, namespace, nil, true, match, opts, newEmpty)
}

// WatchIndexField is the field watchers are indexed by (WithWatchIndex),
// or "" when they are not.
func (s *Store[T]) WatchIndexField() string { return s.indexField }

// WatchIndexed is Watch for a watch whose match can only select objects
// whose index field (WatchIndexField) equals value: the caller's selector
// requires it. The watcher is then handed only the events of such objects
// (see WithWatchIndex), and selects only those: match may be nil when the
// index value is all the selector asks. On a store without an index it is
// Watch.
func (s *Store[T]) WatchIndexed(ctx context.Context, namespace, value string, match func(T) bool, opts *metainternalversion.ListOptions, newEmpty func() T) (watch.Interface, error) {
	if s.indexOf == nil {
		if match == nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("memstore: an indexed watch without a selector on a store without an index"))
		}
		return s.watch(ctx, namespace, nil, false, match, opts, newEmpty)
	}
	return s.watch(ctx, namespace, &value, false, match, opts, newEmpty)
}

// watch starts a watcher of namespace ("" for all), filed under *index
// when index is set, whose events point at the stored objects when shared:
// it is handed first what its options ask for (firstEventsLocked), then
// every change it matches.
func (s *Store[T]) watch(ctx context.Context, namespace string, index *string, shared bool, match func(T) bool, opts *metainternalversion.ListOptions, newEmpty func() T) (watch.Interface, error) {
	if opts == nil {
		opts = &metainternalversion.ListOptions{}
	}
	var from uint64
	if opts.ResourceVersion != "" {
		rv, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q: %v", opts.ResourceVersion, err))
		}
		from = rv
	}
	if _, wantBookmark := watchList(opts); wantBookmark && newEmpty == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("memstore: watch-list needs a constructor for the bookmark object"))
	}

	w := &watcher[T]{
		store:     s,
		namespace: namespace,
		index:     index,
		shared:    shared,
		match:     match,
		done:      make(chan struct{}),
	}

	// The watch is set up once this returns, its first events queued or
	// refused: tell whoever bounds watch setups (pkg/watchsetup, or
	// priority and fairness), as the kube-apiserver's watch cache does.
	defer utilflowcontrol.WatchInitialized(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()

	pre, err := s.firstEventsLocked(w, opts, from, newEmpty)
	if err != nil {
		return nil, err
	}
	w.initial = len(pre)
	if s.bufferSize > 0 {
		// A fixed limit: the channel holds everything that may wait, as
		// it always did, and the queue stays empty.
		w.result = make(chan watch.Event, len(pre)+s.bufferSize)
	} else {
		// A few events go straight into the channel; more wait in the
		// queue, which costs nothing while empty: a channel of 256
		// events was 8 KiB for each of 10,000 agents' mostly idle
		// watches.
		w.result = make(chan watch.Event, directEvents)
	}
	for _, p := range pre {
		w.put(p)
	}
	if w.head < len(w.queue) {
		w.running = true
		go w.run()
	}
	s.addWatcherLocked(w)
	w.stopCtx = context.AfterFunc(ctx, w.Stop)
	return w, nil
}

// directEvents is the room in a watcher's result channel when its limit
// grows with the store (no WithWatchBufferSize): events beyond it wait in
// the watcher's queue.
const directEvents = 16

// watchList reads a watch-list request from opts: whether the current
// objects are sent first, and whether a bookmark then says they all were.
func watchList(opts *metainternalversion.ListOptions) (sendInitial, wantBookmark bool) {
	sendInitial = opts.SendInitialEvents != nil && *opts.SendInitialEvents
	return sendInitial, sendInitial && opts.AllowWatchBookmarks
}

// firstEventsLocked are the events a new watcher w is handed before any
// change: every current object it matches (a watch from resourceVersion
// "" or "0", or a watch-list), nothing (sendInitialEvents=false from
// now), or the history after from (a resumed watch).
func (s *Store[T]) firstEventsLocked(w *watcher[T], opts *metainternalversion.ListOptions, from uint64, newEmpty func() T) ([]pendingEvent[T], error) {
	sendInitial, wantBookmark := watchList(opts)
	switch {
	case sendInitial, opts.SendInitialEvents == nil && from == 0:
		if from > s.rv {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("resource version %d is newer than the current %d", from, s.rv))
		}
		return s.currentEventsLocked(w, wantBookmark, newEmpty)
	case from == 0:
		// sendInitialEvents=false with resourceVersion "" or "0": from now.
		return nil, nil
	default:
		if err := s.checkHistoryLocked(from); err != nil {
			return nil, err
		}
		var pre []pendingEvent[T]
		for i := 0; i < s.hlen; i++ {
			e := s.historyAt(i)
			if e.rv <= from {
				continue
			}
			if p, ok := w.convert(e); ok {
				pre = append(pre, p)
			}
		}
		return pre, nil
	}
}

// currentEventsLocked is an Added event for every current object w
// matches and, with wantBookmark, the bookmark that ends a watch-list's
// initial events.
func (s *Store[T]) currentEventsLocked(w *watcher[T], wantBookmark bool, newEmpty func() T) ([]pendingEvent[T], error) {
	var pre []pendingEvent[T]
	var objs []T
	if w.index != nil && s.indexOf != nil {
		// Only objects filed under its value can match (objindex.go).
		objs = s.indexedLocked(*w.index)
	} else {
		objs = s.currentLocked().items
	}
	for _, o := range objs {
		if w.matches(o) {
			pre = append(pre, pendingEvent[T]{typ: watch.Added, obj: o})
		}
	}
	if wantBookmark {
		bm := newEmpty()
		bm.SetResourceVersion(formatRV(s.rv))
		if err := apistorage.AnnotateInitialEventsEndBookmark(bm); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		pre = append(pre, pendingEvent[T]{typ: watch.Bookmark, own: bm})
	}
	return pre, nil
}

// emitLocked records e in the history and hands it to every watcher that is
// interested, closing those that have fallen too far behind. Indexed
// watchers are looked at only under the index values of the object before
// and after the change: a watcher pinned to another value could match
// neither.
func (s *Store[T]) emitLocked(e event[T]) {
	s.recordLocked(e)
	limit := s.watchLimitLocked()
	for w := range s.watchers {
		s.deliverLocked(w, e, limit)
	}
	if len(s.indexed) == 0 {
		return
	}
	var cur, prev string
	if e.typ != watch.Deleted {
		cur = s.indexOf(e.obj)
		for w := range s.indexed[cur] {
			s.deliverLocked(w, e, limit)
		}
	}
	if e.typ != watch.Added {
		if prev = s.indexOf(e.prev); e.typ == watch.Deleted || prev != cur {
			for w := range s.indexed[prev] {
				s.deliverLocked(w, e, limit)
			}
		}
	}
}

// deliverLocked hands e to w if w is interested, and closes w when too
// much already waits for it.
func (s *Store[T]) deliverLocked(w *watcher[T], e event[T], limit int) {
	p, ok := w.convert(e)
	if !ok {
		return
	}
	if !w.offer(p, limit) {
		// Close it rather than block everybody, grow without bound or
		// silently lose the event. Its client watches again from the
		// last resource version it saw.
		klog.V(2).InfoS("Closing a watch that does not keep up", "namespace", w.namespace, "resourceVersion", s.rv, "waiting", w.initial+limit)
		s.removeWatcherLocked(w)
		w.finish()
	}
}

func (s *Store[T]) addWatcherLocked(w *watcher[T]) {
	if w.index == nil {
		s.watchers[w] = struct{}{}
		return
	}
	m := s.indexed[*w.index]
	if m == nil {
		m = map[*watcher[T]]struct{}{}
		s.indexed[*w.index] = m
	}
	m[w] = struct{}{}
}

func (s *Store[T]) removeWatcherLocked(w *watcher[T]) {
	if w.index == nil {
		delete(s.watchers, w)
		return
	}
	if m := s.indexed[*w.index]; m != nil {
		delete(m, w)
		if len(m) == 0 {
			delete(s.indexed, *w.index)
		}
	}
}

// Watchers returns how many watchers the store has, indexed or not: what
// a writer that computes its objects only for someone checks
// (pkg/copysummary).
func (s *Store[T]) Watchers() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.watchers)
	for _, m := range s.indexed {
		n += len(m)
	}
	return n
}

// IndexedWatchers returns how many watchers are filed under an index
// value: what a REST layer's tests check to know that a watch was indexed.
func (s *Store[T]) IndexedWatchers(value string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.indexed[value])
}
