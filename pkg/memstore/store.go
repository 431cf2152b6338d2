// Package memstore holds the current set of one computed resource in memory
// and serves it to the API server: get, list (in pages, with continue
// tokens, each list from one state) and watch, with resource versions, a
// bounded history for resuming watches, watch-list (initial events followed
// by the initial-events-end bookmark) and the selector transitions the
// watch cache of a kube-apiserver produces.
//
// A producer either hands the complete set to Replace, and the store works
// out what changed (the field copies, pkg/fieldcopy), or hands the objects
// it changed to Upsert and the keys of those it removed to Delete, which
// costs nothing for the objects it did not touch (the downstreamcopies
// view, pkg/copyview). Objects held by the store are never modified after
// they are stored, nor anything they point to. Every object handed out (by
// Get, List or to a watcher) is a copy of its own -- a deep copy, or a
// shallow one with WithEventCopy -- except to a reader that promises only
// to read (Peek, WatchShared); UpsertOwned stores an object without copying
// it, from a writer that gives it up.
package memstore

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
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
	// DefaultHistorySize is the fewest recent events a store keeps so that
	// a watch can resume from a resource version it has already seen.
	DefaultHistorySize = 1000
	// DefaultWatchBufferSize is the fewest events that may wait for one
	// watcher before that watcher is closed as too slow.
	DefaultWatchBufferSize = 256
	// burstSlack is added to twice the number of objects to size the
	// history and the watcher queues; see Store.
	burstSlack = 1024
)

// Key identifies an object in a store: its namespace and name.
type Key struct {
	Namespace, Name string
}

// KeyOf returns the key of o.
func KeyOf(o metav1.Object) Key { return Key{Namespace: o.GetNamespace(), Name: o.GetName()} }

// compareKeys orders keys by namespace, then name.
func compareKeys(a, b Key) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
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
//
// One upstream change may change every object at once (a Secret copied to
// 1,000 clusters by 10 HelmOps is 10,000 rows), so unless they are fixed
// with WithHistorySize and WithWatchBufferSize, the history and the limit on
// what may wait for one watcher both grow with the number of objects: they
// hold max(DefaultHistorySize, 2p+1024) and max(DefaultWatchBufferSize,
// 2p+1024) events, p being the most objects the store has held at once
// (twice, because a Replace that swaps every object causes a Deleted and an
// Added event for each; the peak, so that a burst of deletions does not
// shrink the room it needs). A burst that touches every object therefore
// neither closes a watcher that is reading nor pushes out of the history
// the version a watcher that was cut off will resume from.
//
// What this costs: a history entry (40 bytes) and a waiting event (48
// bytes) point at stored objects, which are never modified and so are
// shared, not copied. Deep copies are made only when an event is put in a
// watcher's result channel (at most 16 per watcher, or
// the fixed buffer size), and by Get and List for what they return. At
// 10,000 objects the history is at most 21,024 entries (under 1 MB) and a
// watcher's queue at most as many events again beyond its initial ones
// (1 MB), plus the replaced object versions they keep alive: at most two
// per history entry and one per waiting event, a few kilobytes each, and
// the history already holds most of those a queue points at. The snapshots kept for paged lists (see
// ListPage) cost 8 bytes per object each, plus the replaced object versions
// they keep alive.
type Store[T Object] struct {
	historySize int // < 0: grows with peak
	bufferSize  int // 0: grows with peak
	now         func() time.Time

	mu   sync.RWMutex
	rv   uint64
	objs map[Key]T
	// peak is the most objects the store has held at once.
	peak int
	// history is a ring of the last hlen events, oldest at hstart; it grows
	// up to historyLimitLocked. Every event bumps rv by one, so the events
	// held have the consecutive resource versions rv-hlen+1 .. rv.
	history []event[T]
	hstart  int
	hlen    int
	// watchers are the watchers that are not indexed; indexed holds the
	// others by the value of the index field they pinned.
	watchers   map[*watcher[T]]struct{}
	indexed    map[string]map[*watcher[T]]struct{}
	indexField string
	indexOf    func(any) string
	eventCopy  func(any) any
	// objIndex holds the objects by their index value when indexOf is
	// set (objindex.go).
	objIndex map[string]map[Key]T

	// order holds the keys of objs, sorted, as of the last snapshot;
	// orderAdds, orderDels and orderRebuild say what changed since (see
	// noteAddedLocked).
	order        []Key
	orderAdds    []Key
	orderDels    int
	orderRebuild bool
	// curMu guards cur, the snapshot of the current state once built, and
	// the updates of order made while s.mu is held for reading.
	curMu sync.Mutex
	cur   *snapshot[T]

	// kept are the snapshots of paged lists, by resource version.
	maxSnapshots int
	snapshotTTL  time.Duration
	snapMu       sync.Mutex
	kept         map[uint64]keptSnapshot[T]
}

// New returns an empty store.
func New[T Object](opts ...Option) *Store[T] {
	c := config{
		historySize: -1,
		snapshots:   DefaultListSnapshots,
		snapshotTTL: DefaultListSnapshotTTL,
		initialRV:   uint64(time.Now().UnixMicro()),
		now:         time.Now,
	}
	for _, o := range opts {
		o(&c)
	}
	s := &Store[T]{
		historySize: c.historySize,
		bufferSize:  c.bufferSize,
		now:         c.now,
		rv:          c.initialRV,
		objs:        map[Key]T{},
		watchers:    map[*watcher[T]]struct{}{},
		indexed:     map[string]map[*watcher[T]]struct{}{},
		indexField:  c.indexField,
		indexOf:     c.indexOf,
		eventCopy:   c.eventCopy,
		objIndex:    map[string]map[Key]T{},

		maxSnapshots: c.snapshots,
		snapshotTTL:  c.snapshotTTL,
		kept:         map[uint64]keptSnapshot[T]{},
	}
	if c.historySize >= 0 {
		s.history = make([]event[T], c.historySize)
	}
	return s
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
//
// Replace looks at every object the store holds; a producer that knows
// which objects it changed should call Upsert and Delete instead.
func (s *Store[T]) Replace(objs []T) {
	next := make(map[Key]T, len(objs))
	for _, o := range objs {
		next[KeyOf(o)] = o
	}
	now := metav1.NewTime(s.now()).Rfc3339Copy()

	s.mu.Lock()
	defer s.mu.Unlock()

	keys := make([]Key, 0, len(next)+len(s.objs))
	for k := range next {
		keys = append(keys, k)
	}
	for k := range s.objs {
		if _, ok := next[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)

	for _, k := range keys {
		if in, ok := next[k]; ok {
			s.putLocked(k, in, now, false)
		} else {
			s.deleteLocked(k)
		}
	}
}

// Upsert stores each of objs, in the order given, as Replace does with one
// object it is handed: an object that differs from the one held under its
// namespace/name (ignoring resourceVersion, creationTimestamp and uid), or
// that is new, gets the next resource version, its own deep copy in the
// store and one event (Modified or Added); an object equal to the one held
// changes nothing, costs no copy and sends no event. Objects the store holds
// that are not in objs are left alone. It returns how many objects changed.
//
// All of objs are applied at once: a list or get sees either none or all of
// them. objs must not hold nil pointers; if two have the same
// namespace/name, both are applied in turn. Upsert neither keeps nor
// modifies objs or its elements. It never waits for a watcher.
func (s *Store[T]) Upsert(objs ...T) int {
	return s.upsert(objs, false)
}

// UpsertOwned is Upsert for objects the caller gives up: an object that
// changes is stored itself, with its resource version, uid and
// creationTimestamp set, not a deep copy of it. The caller must not touch
// any of objs, nor anything they point to, after the call. What they
// point to may be shared with objects the store holds -- a shallow copy of
// one from Peek whose changed fields are values of its own -- since the
// store never modifies what a stored object points to. The view restates
// every row of a changed source on every replica this way: a deep copy of
// each row, made only to be stored, was a sixteenth of a replica's CPU in
// a source change at 2,000 pulled Clusters (docs/benchmarks.md).
func (s *Store[T]) UpsertOwned(objs ...T) int {
	return s.upsert(objs, true)
}

func (s *Store[T]) upsert(objs []T, owned bool) int {
	if len(objs) == 0 {
		return 0
	}
	now := metav1.NewTime(s.now()).Rfc3339Copy()
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := 0
	for _, o := range objs {
		if s.putLocked(KeyOf(o), o, now, owned) {
			changed++
		}
	}
	return changed
}

// Delete removes the objects with the given keys, in the order given: each
// one the store holds gets the next resource version and a Deleted event
// holding its last state; keys the store does not hold are ignored. All of
// keys are applied at once. It returns how many objects were removed and
// never waits for a watcher.
func (s *Store[T]) Delete(keys ...Key) int {
	if len(keys) == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	deleted := 0
	for _, k := range keys {
		if s.deleteLocked(k) {
			deleted++
		}
	}
	return deleted
}

// putLocked stores in under k unless the store holds an equal object, and
// reports whether it did: a deep copy of in, or in itself when owned
// (UpsertOwned).
func (s *Store[T]) putLocked(k Key, in T, now metav1.Time, owned bool) bool {
	old, had := s.objs[k]
	if had && equalIgnoringServerFields(old, in) {
		return false
	}
	stored := in
	if !owned {
		stored = in.DeepCopyObject().(T)
	}
	typ := watch.Added
	if had {
		typ = watch.Modified
		stored.SetCreationTimestamp(old.GetCreationTimestamp())
		stored.SetUID(old.GetUID())
	} else {
		if ts := stored.GetCreationTimestamp(); ts.IsZero() {
			stored.SetCreationTimestamp(now)
		}
		if stored.GetUID() == "" {
			stored.SetUID(uuid.NewUUID())
		}
		s.noteAddedLocked(k)
	}
	s.rv++
	stored.SetResourceVersion(formatRV(s.rv))
	s.objs[k] = stored
	s.indexPutLocked(k, old, had, stored)
	s.peak = max(s.peak, len(s.objs))
	s.emitLocked(event[T]{rv: s.rv, typ: typ, obj: stored, prev: old})
	return true
}

// deleteLocked removes the object held under k, if any, and reports whether
// there was one.
func (s *Store[T]) deleteLocked(k Key) bool {
	old, had := s.objs[k]
	if !had {
		return false
	}
	s.rv++
	delete(s.objs, k)
	s.indexDeleteLocked(k, old)
	s.orderDels++
	s.emitLocked(event[T]{rv: s.rv, typ: watch.Deleted, prev: old})
	return true
}

// semanticIgnoringServerFields is apimachinery's semantic equality, except
// that the resourceVersion, creationTimestamp and uid of an ObjectMeta do
// not count. The ObjectMeta values it compares are copies, so nothing is
// modified; the computed types have no ObjectMeta besides their own.
var semanticIgnoringServerFields = func() conversion.Equalities {
	e := apiequality.Semantic.Copy()
	if err := e.AddFunc(func(a, b metav1.ObjectMeta) bool {
		a.ResourceVersion, b.ResourceVersion = "", ""
		a.CreationTimestamp, b.CreationTimestamp = metav1.Time{}, metav1.Time{}
		a.UID, b.UID = "", ""
		return apiequality.Semantic.DeepEqual(a, b)
	}); err != nil {
		panic(err)
	}
	return e
}()

// ContentEqualer is implemented by stored types that compare two objects
// apart from the fields the store assigns faster than reflection can
// (DownstreamCopy: every row a change recomputes is compared).
type ContentEqualer[T any] interface {
	EqualIgnoringServerFields(other T) bool
}

// equalIgnoringServerFields reports whether a and b are semantically equal
// apart from the fields the store assigns, without copying either.
func equalIgnoringServerFields[T Object](a, b T) bool {
	if e, ok := any(a).(ContentEqualer[T]); ok {
		return e.EqualIgnoringServerFields(b)
	}
	return semanticIgnoringServerFields.DeepEqual(a, b)
}

// Get returns a deep copy of the object namespace/name, if the store holds it.
func (s *Store[T]) Get(namespace, name string) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objs[Key{Namespace: namespace, Name: name}]
	if !ok {
		var zero T
		return zero, false
	}
	return o.DeepCopyObject().(T), true
}

// Peek returns the object held under namespace/name itself, not a copy:
// the caller must not change it nor anything it points to. It serves
// readers that build a new object from the one held -- a shallow copy whose
// changed fields are their own values -- and hand it to UpsertOwned, which
// keeps it as it is: the view, when only a row's status or source version
// moves. Get's deep copy per row was 0.22 s of the view's 0.75 s
// in a change of every source at 10,000 rows (docs/benchmarks.md).
func (s *Store[T]) Peek(namespace, name string) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objs[Key{Namespace: namespace, Name: name}]
	return o, ok
}

// ResourceVersion returns the store's current resource version: that of
// its last change. A change of several objects (Replace, Upsert, Delete)
// is applied under one lock, so this never falls in the middle of one: a
// watcher that has seen an event of this version has seen every change up
// to a state the store really had (pkg/copysummary flushes only then).
func (s *Store[T]) ResourceVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }
