// Package memstore holds the current set of one computed resource in memory
// and serves it to the API server: get, list and watch, with resource
// versions, a bounded history for resuming watches, watch-list (initial
// events followed by the initial-events-end bookmark) and the selector
// transitions the watch cache of a kube-apiserver produces.
//
// The producer (the copy engine) computes the complete set and hands it to
// Replace; the store works out what changed. Objects held by the store are
// never modified after they are stored, and every object handed out (by Get,
// List or to a watcher) is a deep copy of its own.
package memstore

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
)

// Object is what the store holds: a pointer to an API object with standard
// object metadata, such as *courier.DownstreamCopy.
type Object interface {
	runtime.Object
	metav1.Object
}

const (
	// DefaultHistorySize is how many recent events a store keeps so that a
	// watch can resume from a resource version it has already seen.
	DefaultHistorySize = 1000
	// DefaultWatchBufferSize is how many events may wait for one watcher
	// before that watcher is closed as too slow.
	DefaultWatchBufferSize = 256
)

// Option configures a Store.
type Option func(*config)

type config struct {
	historySize int
	bufferSize  int
	initialRV   uint64
	now         func() time.Time
}

// WithHistorySize sets how many recent events are kept for watches that
// resume from a resource version (at least 0; DefaultHistorySize if unset).
func WithHistorySize(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.historySize = n
		}
	}
}

// WithWatchBufferSize sets how many events may queue up for one watcher,
// beyond its initial events, before the watcher is closed (at least 1;
// DefaultWatchBufferSize if unset).
func WithWatchBufferSize(n int) Option {
	return func(c *config) {
		if n >= 1 {
			c.bufferSize = n
		}
	}
}

// WithInitialResourceVersion sets the resource version of the empty store;
// the first change gets rv+1. By default it is the wall-clock time in
// microseconds when the store is created, so that resource versions a client
// got from an earlier process (or another replica started at another time)
// are either older than this store's history or newer than its current
// version, and a watch from them gets 410 Gone and relists instead of
// silently resuming from a version that means something else here.
func WithInitialResourceVersion(rv uint64) Option {
	return func(c *config) { c.initialRV = rv }
}

// WithClock sets the clock used for the creationTimestamp of new objects.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

type key struct {
	namespace, name string
}

func keyOf(o metav1.Object) key { return key{namespace: o.GetNamespace(), name: o.GetName()} }

func (k key) less(o key) bool {
	if k.namespace != o.namespace {
		return k.namespace < o.namespace
	}
	return k.name < o.name
}

// event is one change, as recorded in the history.
type event[T Object] struct {
	rv  uint64
	typ watch.EventType // Added, Modified or Deleted
	// obj is the stored object after an Added or Modified event.
	obj T
	// prev is the stored object before a Modified or Deleted event.
	prev T
}

// Store is a watchable in-memory set of computed objects of one resource,
// across all namespaces. It is safe for concurrent use.
type Store[T Object] struct {
	historySize int
	bufferSize  int
	now         func() time.Time

	mu   sync.RWMutex
	rv   uint64
	objs map[key]T
	// history is a ring of the last len(history) events, oldest at hstart.
	// Every event bumps rv by one, so the events held have the consecutive
	// resource versions rv-hlen+1 .. rv.
	history  []event[T]
	hstart   int
	hlen     int
	watchers map[*watcher[T]]struct{}
}

// New returns an empty store.
func New[T Object](opts ...Option) *Store[T] {
	c := config{
		historySize: DefaultHistorySize,
		bufferSize:  DefaultWatchBufferSize,
		initialRV:   uint64(time.Now().UnixMicro()),
		now:         time.Now,
	}
	for _, o := range opts {
		o(&c)
	}
	return &Store[T]{
		historySize: c.historySize,
		bufferSize:  c.bufferSize,
		now:         c.now,
		rv:          c.initialRV,
		objs:        map[key]T{},
		history:     make([]event[T], c.historySize),
		watchers:    map[*watcher[T]]struct{}{},
	}
}

// Replace sets the complete current set of objects, in all namespaces. It
// compares each object with the one it holds under the same namespace/name,
// ignoring resourceVersion, creationTimestamp and uid, which the store
// assigns. For each object added, changed or gone it bumps the resource
// version, stores a deep copy stamped with that version (keeping the
// creationTimestamp and uid of an object it already had; a new object keeps
// its own or gets the current time and a fresh uid), and sends the event to
// the watchers. Objects that did not change produce no event and keep their
// resource version. Changes are applied in namespace/name order.
//
// objs must not hold nil pointers; if two have the same namespace/name the
// last one wins. Replace neither keeps nor modifies objs or its elements.
// It never waits for a watcher.
func (s *Store[T]) Replace(objs []T) {
	next := make(map[key]T, len(objs))
	for _, o := range objs {
		next[keyOf(o)] = o
	}
	now := metav1.NewTime(s.now()).Rfc3339Copy()

	s.mu.Lock()
	defer s.mu.Unlock()

	keys := make([]key, 0, len(next)+len(s.objs))
	for k := range next {
		keys = append(keys, k)
	}
	for k := range s.objs {
		if _, ok := next[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })

	for _, k := range keys {
		old, had := s.objs[k]
		in, want := next[k]
		switch {
		case want && !had:
			stored := in.DeepCopyObject().(T)
			if ts := stored.GetCreationTimestamp(); ts.IsZero() {
				stored.SetCreationTimestamp(now)
			}
			if stored.GetUID() == "" {
				stored.SetUID(uuid.NewUUID())
			}
			s.rv++
			stored.SetResourceVersion(formatRV(s.rv))
			s.objs[k] = stored
			s.emitLocked(event[T]{rv: s.rv, typ: watch.Added, obj: stored})
		case want && had:
			if equalIgnoringServerFields(old, in) {
				continue
			}
			stored := in.DeepCopyObject().(T)
			stored.SetCreationTimestamp(old.GetCreationTimestamp())
			stored.SetUID(old.GetUID())
			s.rv++
			stored.SetResourceVersion(formatRV(s.rv))
			s.objs[k] = stored
			s.emitLocked(event[T]{rv: s.rv, typ: watch.Modified, obj: stored, prev: old})
		case had:
			s.rv++
			delete(s.objs, k)
			s.emitLocked(event[T]{rv: s.rv, typ: watch.Deleted, prev: old})
		}
	}
}

// equalIgnoringServerFields reports whether a and b are semantically equal
// once the fields the store assigns are cleared.
func equalIgnoringServerFields[T Object](a, b T) bool {
	ac, bc := a.DeepCopyObject().(T), b.DeepCopyObject().(T)
	for _, o := range []T{ac, bc} {
		o.SetResourceVersion("")
		o.SetCreationTimestamp(metav1.Time{})
		o.SetUID("")
	}
	return apiequality.Semantic.DeepEqual(ac, bc)
}

// Get returns a deep copy of the object namespace/name, if the store holds it.
func (s *Store[T]) Get(namespace, name string) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objs[key{namespace: namespace, name: name}]
	if !ok {
		var zero T
		return zero, false
	}
	return o.DeepCopyObject().(T), true
}

// List returns deep copies of the objects in namespace (all namespaces when
// empty) for which match returns true (all when match is nil), sorted by
// namespace and name, and the store's current resource version.
func (s *Store[T]) List(namespace string, match func(T) bool) (items []T, resourceVersion string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return selectSorted(s.objs, namespace, match), formatRV(s.rv)
}

// ListExact is List as of resourceVersion: the state right after the change
// that got that version, and that version in canonical form. It can go back as far as the history reaches; for a
// version older than that, newer than the current one, or not a number it
// returns 410 Gone (a client asking for an exact version then relists).
func (s *Store[T]) ListExact(namespace, resourceVersion string, match func(T) bool) (items []T, normalizedResourceVersion string, err error) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q: %v", resourceVersion, err))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.checkHistoryLocked(rv); err != nil {
		return nil, "", err
	}
	if rv == s.rv {
		return selectSorted(s.objs, namespace, match), formatRV(rv), nil
	}
	// Undo the events after rv, newest first.
	state := make(map[key]T, len(s.objs))
	for k, o := range s.objs {
		state[k] = o
	}
	for i := s.hlen - 1; i >= 0; i-- {
		e := s.historyAt(i)
		if e.rv <= rv {
			break
		}
		switch e.typ {
		case watch.Added:
			delete(state, keyOf(e.obj))
		case watch.Modified, watch.Deleted:
			state[keyOf(e.prev)] = e.prev
		}
	}
	return selectSorted(state, namespace, match), formatRV(rv), nil
}

func selectSorted[T Object](objs map[key]T, namespace string, match func(T) bool) []T {
	keys := make([]key, 0, len(objs))
	for k, o := range objs {
		if namespace != "" && k.namespace != namespace {
			continue
		}
		if match != nil && !match(o) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	items := make([]T, 0, len(keys))
	for _, k := range keys {
		items = append(items, objs[k].DeepCopyObject().(T))
	}
	return items
}

// checkHistoryLocked returns 410 Gone unless the state at rv can be
// reconstructed, that is unless every event after rv is still in the
// history.
func (s *Store[T]) checkHistoryLocked(rv uint64) error {
	oldest := s.rv - uint64(s.hlen) // the oldest version we can start from
	switch {
	case rv > s.rv:
		return apierrors.NewResourceExpired(fmt.Sprintf("resource version %d is newer than the current %d", rv, s.rv))
	case rv < oldest:
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, oldest))
	}
	return nil
}

// historyAt returns the i-th oldest event held.
func (s *Store[T]) historyAt(i int) event[T] {
	return s.history[(s.hstart+i)%len(s.history)]
}

// emitLocked records e in the history and hands it to every watcher that is
// interested, closing those whose buffer is full.
func (s *Store[T]) emitLocked(e event[T]) {
	if n := len(s.history); n > 0 {
		if s.hlen < n {
			s.history[(s.hstart+s.hlen)%n] = e
			s.hlen++
		} else {
			s.history[s.hstart] = e
			s.hstart = (s.hstart + 1) % n
		}
	}
	for w := range s.watchers {
		ev, ok := w.convert(e)
		if !ok {
			continue
		}
		select {
		case w.result <- ev:
		default:
			// The watcher has fallen behind: close it rather than block
			// everybody or silently lose the event. Its client watches
			// again from the last resource version it saw.
			s.closeWatcherLocked(w)
		}
	}
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }
