package memstore

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
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
// A watcher that does not keep up is closed: when more events are waiting
// for it than the store's watch buffer holds, its result channel is closed
// after the events already queued, and its client watches again. The watch
// ends, and its result channel is closed, on Stop or when ctx is done.
func (s *Store[T]) Watch(ctx context.Context, namespace string, match func(T) bool, opts *metainternalversion.ListOptions, newEmpty func() T) (watch.Interface, error) {
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
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	wantBookmark := sendInitial && opts.AllowWatchBookmarks
	if wantBookmark && newEmpty == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("memstore: watch-list needs a constructor for the bookmark object"))
	}

	w := &watcher[T]{
		store:     s,
		namespace: namespace,
		match:     match,
		done:      make(chan struct{}),
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	var pre []watch.Event
	switch {
	case sendInitial, opts.SendInitialEvents == nil && from == 0:
		if from > s.rv {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("resource version %d is newer than the current %d", from, s.rv))
		}
		for _, o := range selectSorted(s.objs, namespace, match) {
			pre = append(pre, watch.Event{Type: watch.Added, Object: o})
		}
		if wantBookmark {
			bm := newEmpty()
			bm.SetResourceVersion(formatRV(s.rv))
			if err := apistorage.AnnotateInitialEventsEndBookmark(bm); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			pre = append(pre, watch.Event{Type: watch.Bookmark, Object: bm})
		}
	case from == 0:
		// sendInitialEvents=false with resourceVersion "" or "0": from now.
	default:
		if err := s.checkHistoryLocked(from); err != nil {
			return nil, err
		}
		for i := 0; i < s.hlen; i++ {
			e := s.historyAt(i)
			if e.rv <= from {
				continue
			}
			if ev, ok := w.convert(e); ok {
				pre = append(pre, ev)
			}
		}
	}

	w.result = make(chan watch.Event, len(pre)+s.bufferSize)
	for _, ev := range pre {
		w.result <- ev
	}
	s.watchers[w] = struct{}{}

	if done := ctx.Done(); done != nil {
		go func() {
			select {
			case <-done:
				w.Stop()
			case <-w.done:
			}
		}()
	}
	return w, nil
}

// watcher is one watch on a Store. Its result channel is written and closed
// only with the store's lock held.
type watcher[T Object] struct {
	store     *Store[T]
	namespace string
	match     func(T) bool
	result    chan watch.Event
	done      chan struct{}
}

var _ watch.Interface = &watcher[Object]{}

// ResultChan implements watch.Interface.
func (w *watcher[T]) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface. It closes the result channel; calling it
// more than once is harmless.
func (w *watcher[T]) Stop() {
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	w.store.closeWatcherLocked(w)
}

func (s *Store[T]) closeWatcherLocked(w *watcher[T]) {
	if _, ok := s.watchers[w]; !ok {
		return
	}
	delete(s.watchers, w)
	close(w.result)
	close(w.done)
}

// stopSlowWatcherLocked closes w because its buffer is full.
func (s *Store[T]) stopSlowWatcherLocked(w *watcher[T]) {
	klog.V(2).InfoS("Closing a watch that does not keep up", "namespace", w.namespace, "resourceVersion", s.rv, "buffer", cap(w.result))
	s.closeWatcherLocked(w)
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
func (w *watcher[T]) convert(e event[T]) (watch.Event, bool) {
	cur := e.typ != watch.Deleted && w.matches(e.obj)
	prev := e.typ != watch.Added && w.matches(e.prev)
	switch {
	case cur && !prev:
		return watch.Event{Type: watch.Added, Object: e.obj.DeepCopyObject()}, true
	case cur && prev:
		return watch.Event{Type: watch.Modified, Object: e.obj.DeepCopyObject()}, true
	case prev:
		gone := e.prev.DeepCopyObject().(T)
		gone.SetResourceVersion(formatRV(e.rv))
		return watch.Event{Type: watch.Deleted, Object: gone}, true
	}
	return watch.Event{}, false
}
