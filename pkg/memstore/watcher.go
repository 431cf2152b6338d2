package memstore

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

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

// eventOf is p as w receives it: a copy of the stored object (a deep copy,
// or the store's WithEventCopy), or, for a shared watcher (WatchShared),
// the stored object itself unless the event's resource version is not the
// object's (a Deleted event).
func (w *watcher[T]) eventOf(p pendingEvent[T]) watch.Event {
	if p.own != nil {
		return watch.Event{Type: p.typ, Object: p.own}
	}
	if w.shared && p.deletedRV == 0 {
		return watch.Event{Type: p.typ, Object: p.obj}
	}
	var c T
	if w.store.eventCopy != nil {
		c = w.store.eventCopy(p.obj).(T)
	} else {
		c = p.obj.DeepCopyObject().(T)
	}
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
	// shared: the watcher's events point at the stored objects
	// (WatchShared).
	shared bool
	match  func(T) bool
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
		w.result <- w.eventOf(p)
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
		w.result <- w.eventOf(p)
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
		case w.result <- w.eventOf(p):
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

// matches reports whether o is selected by w. An indexed watcher selects
// only objects of its index value, whatever its match says; so the REST
// layer can leave match nil when the selector pins the index field and
// nothing else (every courier-agent's watch), and no field set is built
// for its events.
func (w *watcher[T]) matches(o T) bool {
	if w.namespace != "" && o.GetNamespace() != w.namespace {
		return false
	}
	if w.index != nil && w.store.indexOf(o) != *w.index {
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
