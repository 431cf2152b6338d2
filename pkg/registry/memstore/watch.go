package memstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	apistorage "k8s.io/apiserver/pkg/storage"
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
// change), as the watch cache does. Every event holds a deep copy of its own.
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
	return s.watch(ctx, namespace, nil, match, opts, newEmpty)
}

// WatchIndexField is the field watchers are indexed by (WithWatchIndex),
// or "" when they are not.
func (s *Store[T]) WatchIndexField() string { return s.indexField }

// WatchIndexed is Watch for a watch whose match can only select objects
// whose index field (WatchIndexField) equals value: the caller's selector
// requires it. The watcher is then handed only the events of such objects
// (see WithWatchIndex). On a store without an index it is Watch.
func (s *Store[T]) WatchIndexed(ctx context.Context, namespace, value string, match func(T) bool, opts *metainternalversion.ListOptions, newEmpty func() T) (watch.Interface, error) {
	if s.indexOf == nil {
		return s.watch(ctx, namespace, nil, match, opts, newEmpty)
	}
	return s.watch(ctx, namespace, &value, match, opts, newEmpty)
}

// watch starts a watcher of namespace ("" for all), filed under *index
// when index is set: it is handed first what its options ask for
// (firstEventsLocked), then every change it matches.
func (s *Store[T]) watch(ctx context.Context, namespace string, index *string, match func(T) bool, opts *metainternalversion.ListOptions, newEmpty func() T) (watch.Interface, error) {
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
		match:     match,
		done:      make(chan struct{}),
	}

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

// pendingEvent is an event waiting for one watcher. It points at a stored
// object, which is never modified, and is copied only when it is sent.
type pendingEvent[T Object] struct {
	typ watch.EventType
	obj T
	// deletedRV, when not zero, is the resource version the copy of obj gets
	// (a Deleted event carries the last state with the deletion's version).
	deletedRV uint64
	// own, when set, is sent instead of a copy of obj: an object made for
	// this watcher alone (the initial-events-end bookmark).
	own runtime.Object
}

func (p pendingEvent[T]) event() watch.Event {
	if p.own != nil {
		return watch.Event{Type: p.typ, Object: p.own}
	}
	c := p.obj.DeepCopyObject().(T)
	if p.deletedRV != 0 {
		c.SetResourceVersion(formatRV(p.deletedRV))
	}
	return watch.Event{Type: p.typ, Object: c}
}

// watcher is one watch on a Store. Events reach its result channel either
// directly from the writer (under the store's lock, while nothing is queued
// and the channel has room) or through its queue and its run goroutine. A
// writer sends directly only when the queue is empty, and run removes an
// event from the queue only after it has sent it, so the two never send at
// the same time and order is kept. run is started when an event is queued
// and ends when the queue is empty: an idle watcher, such as each of
// 10,000 agents' watches between changes, holds no goroutine of its own
// (nor does its context: context.AfterFunc stops it). The channel is
// closed under mu, by run when it ends after Stop or finish, or else by
// Stop or finish themselves.
type watcher[T Object] struct {
	store     *Store[T]
	namespace string
	// index, when set, is the index value the watcher is filed under.
	index *string
	match func(T) bool
	// initial is the number of initial events, which do not count against
	// the store's watch limit.
	initial int
	result  chan watch.Event
	done    chan struct{} // closed by Stop
	stop    sync.Once
	// stopCtx undoes the context.AfterFunc that stops the watcher.
	stopCtx func() bool

	mu sync.Mutex
	// queue[head:] are the events waiting for room in the channel, oldest
	// first.
	queue []pendingEvent[T]
	head  int
	// finishing: no more events will come; close the channel once the
	// queue is empty.
	finishing bool
	// closed: the result channel is closed.
	closed bool
	// running: run is moving the queue into the channel.
	running bool
}

var _ watch.Interface = &watcher[Object]{}

// ResultChan implements watch.Interface.
func (w *watcher[T]) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface. The result channel is closed soon after,
// and events still waiting are dropped; calling Stop more than once is
// harmless.
func (w *watcher[T]) Stop() {
	w.store.mu.Lock()
	w.store.removeWatcherLocked(w)
	w.store.mu.Unlock()
	w.stop.Do(func() {
		close(w.done)
		w.mu.Lock()
		if !w.running {
			w.closeLocked()
		}
		w.mu.Unlock()
		if w.stopCtx != nil {
			w.stopCtx()
		}
	})
}

// put queues p during Watch, before anyone else can see w.
func (w *watcher[T]) put(p pendingEvent[T]) {
	if w.head == len(w.queue) && len(w.result) < cap(w.result) {
		w.result <- p.event()
		return
	}
	w.queue = append(w.queue, p)
}

// offer hands p to w, and reports false, leaving w unchanged, when more than
// limit events beyond its initial ones would be waiting.
func (w *watcher[T]) offer(p pendingEvent[T], limit int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.finishing {
		return true
	}
	waiting := len(w.queue) - w.head
	if waiting == 0 && len(w.result) < cap(w.result) {
		// run is not sending (it sends only while the queue is not
		// empty), so this does not block.
		w.result <- p.event()
		return true
	}
	if len(w.result)+waiting >= w.initial+limit {
		return false
	}
	w.queue = append(w.queue, p)
	if !w.running {
		w.running = true
		go w.run()
	}
	return true
}

// finish makes the result channel close once what is waiting has been
// sent.
func (w *watcher[T]) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finishing = true
	switch {
	case w.running:
	case w.head == len(w.queue):
		w.closeLocked()
	default:
		w.running = true
		go w.run()
	}
}

// run moves queued events into the result channel, copying each on the
// way, until the queue is empty or the watch is stopped; it closes the
// channel when it ends after Stop, or once finishing with nothing left.
func (w *watcher[T]) run() {
	for {
		w.mu.Lock()
		if w.head == len(w.queue) || w.stopped() {
			w.running = false
			if w.finishing || w.stopped() {
				w.closeLocked()
			}
			w.mu.Unlock()
			return
		}
		p := w.queue[w.head]
		w.mu.Unlock()
		select {
		case w.result <- p.event():
		case <-w.done:
			continue
		}
		w.mu.Lock()
		w.popLocked()
		w.mu.Unlock()
	}
}

func (w *watcher[T]) stopped() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// closeLocked closes the result channel, once, and drops what waits.
func (w *watcher[T]) closeLocked() {
	if w.closed {
		return
	}
	w.closed = true
	w.queue, w.head = nil, 0
	close(w.result)
}

// popLocked drops the oldest queued event, and the queue's memory once it
// is empty or mostly consumed.
func (w *watcher[T]) popLocked() {
	w.queue[w.head] = pendingEvent[T]{}
	w.head++
	switch {
	case w.head == len(w.queue):
		if cap(w.queue) > 4*DefaultWatchBufferSize {
			w.queue = nil
		} else {
			w.queue = w.queue[:0]
		}
		w.head = 0
	case w.head >= DefaultWatchBufferSize && 2*w.head >= len(w.queue):
		n := copy(w.queue, w.queue[w.head:])
		clear(w.queue[n:])
		w.queue, w.head = w.queue[:n], 0
	}
}

func (w *watcher[T]) matches(o T) bool {
	if w.namespace != "" && o.GetNamespace() != w.namespace {
		return false
	}
	return w.match == nil || w.match(o)
}

// convert turns a stored event into the event this watcher should see, if
// any: Added for an object that starts to match, Modified for one that still
// matches, Deleted for one that stops matching or is gone.
func (w *watcher[T]) convert(e event[T]) (pendingEvent[T], bool) {
	cur := e.typ != watch.Deleted && w.matches(e.obj)
	prev := e.typ != watch.Added && w.matches(e.prev)
	switch {
	case cur && !prev:
		return pendingEvent[T]{typ: watch.Added, obj: e.obj}, true
	case cur && prev:
		return pendingEvent[T]{typ: watch.Modified, obj: e.obj}, true
	case prev:
		return pendingEvent[T]{typ: watch.Deleted, obj: e.prev, deletedRV: e.rv}, true
	}
	return pendingEvent[T]{}, false
}

// IndexedWatchers returns how many watchers are filed under an index
// value: what a REST layer's tests check to know that a watch was indexed.
func (s *Store[T]) IndexedWatchers(value string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.indexed[value])
}
