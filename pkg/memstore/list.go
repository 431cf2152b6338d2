package memstore

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

const (
	// DefaultListSnapshots is how many states a store keeps for the
	// continue tokens of paged lists.
	DefaultListSnapshots = 8
	// DefaultListSnapshotTTL is how long a store keeps such a state.
	DefaultListSnapshotTTL = 5 * time.Minute
)

// WithListSnapshots sets how many states the store keeps for paged lists
// (at least 0) and for how long (more than 0); see ListPage.
func WithListSnapshots(n int, ttl time.Duration) Option {
	return func(c *config) {
		if n >= 0 {
			c.snapshots = n
		}
		if ttl > 0 {
			c.snapshotTTL = ttl
		}
	}
}

// snapshot is the state of the store at one resource version: every object,
// sorted by namespace and name. Neither the slice nor the objects in it are
// modified once it is built, so it is read without any lock.
type snapshot[T Object] struct {
	rv    uint64
	items []T
}

// bounds returns the range of items in namespace (all when empty).
func (sn *snapshot[T]) bounds(namespace string) (lo, hi int) {
	if namespace == "" {
		return 0, len(sn.items)
	}
	lo, _ = slices.BinarySearchFunc(sn.items, namespace, func(o T, ns string) int { return strings.Compare(o.GetNamespace(), ns) })
	hi = lo + countWhile(sn.items[lo:], func(o T) bool { return o.GetNamespace() == namespace })
	return lo, hi
}

// after returns the index of the first item whose key is greater than k.
func (sn *snapshot[T]) after(k Key) int {
	i, found := slices.BinarySearchFunc(sn.items, k, func(o T, k Key) int { return compareKeys(KeyOf(o), k) })
	if found {
		i++
	}
	return i
}

// countWhile returns how many of the leading items satisfy f, by binary
// search: f holds for a prefix of items.
func countWhile[T any](items []T, f func(T) bool) int {
	lo, hi := 0, len(items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f(items[m]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// PageOptions says which part of a list ListPage returns.
type PageOptions struct {
	// Limit is the most items to return; with 0 (or less) all of them.
	Limit int64
	// Continue is the token that ended the previous page: the list goes on
	// after that page's last item, in the state that page was taken from.
	Continue string
	// ResourceVersion, when set, asks for the state right after the change
	// that got this version instead of the current one. Not allowed with
	// Continue, which carries its own.
	ResourceVersion string
}

// Page is one page of a list.
type Page[T Object] struct {
	// Items are deep copies, sorted by namespace and name.
	Items []T
	// ResourceVersion is the version of the state the items are from: the
	// same on every page of one list.
	ResourceVersion string
	// Continue, on every page but the last, is the token for the next one.
	Continue string
	// RemainingItemCount is how many items follow this page, when there is
	// a next page and every object matches (match is nil).
	RemainingItemCount *int64
}

// ListPage returns the objects in namespace (all namespaces when empty) for
// which match returns true (all when match is nil), sorted by namespace and
// name, at most opts.Limit of them, all from one state of the store.
//
// A list that does not fit in one page is served from a snapshot of the
// store (a sorted slice of pointers to the stored objects, which are never
// modified): its pages hold every object of that state that matches
// exactly once, whatever changes in the meantime. The store keeps the last
// few snapshots that a continue token refers to for a few minutes (see
// WithListSnapshots), and rebuilds the state of a token from the history
// while the history reaches back to it. A token whose state is neither kept
// nor in the history gets 410 Gone with reason Expired, as the
// kube-apiserver answers when etcd has compacted a continue token's
// revision; its client starts the list over. A token that cannot be read,
// or one from a list of another namespace, is a bad request (400), and so
// is a resource version that is not a number. A resource version the
// history no longer reaches, or newer than the current one, gets 410 Gone.
//
// The objects are the store's own, shared with every other reader: the
// store never modifies an object it holds (a change stores a new one), and
// callers must not either. The API server's read path only converts and
// encodes them. Copying each one made a list of 10,000 rows allocate
// 10,000 deep copies only to encode and drop them.
//
// Like the kube-apiserver, the limit counts matching objects: a page may
// look at many more objects than it returns. There is a next page only if
// another object matches.
func (s *Store[T]) ListPage(namespace string, match func(T) bool, opts PageOptions) (Page[T], error) {
	sn, start, err := s.pageStart(namespace, opts)
	if err != nil {
		return Page[T]{}, err
	}
	lo, hi := sn.bounds(namespace)
	i := max(lo, start)
	var picked []T
	if match == nil {
		n := int64(max(0, hi-i))
		if opts.Limit > 0 {
			n = min(n, opts.Limit)
		}
		picked = make([]T, 0, n)
	}
	more := false
	for ; i < hi; i++ {
		o := sn.items[i]
		if match != nil && !match(o) {
			continue
		}
		if opts.Limit > 0 && int64(len(picked)) >= opts.Limit {
			more = true
			break
		}
		picked = append(picked, o)
	}
	page := Page[T]{Items: make([]T, len(picked)), ResourceVersion: formatRV(sn.rv)}
	if more {
		page.Continue = encodeContinue(sn.rv, KeyOf(picked[len(picked)-1]))
		if match == nil {
			remaining := int64(hi - i)
			page.RemainingItemCount = &remaining
		}
		s.keepSnapshot(sn)
	}
	copy(page.Items, picked)
	return page, nil
}

// pageStart returns the snapshot a page comes from and the index in it of
// the first item the page may hold.
func (s *Store[T]) pageStart(namespace string, opts PageOptions) (*snapshot[T], int, error) {
	if opts.Continue == "" {
		if opts.ResourceVersion == "" {
			s.mu.RLock()
			defer s.mu.RUnlock()
			return s.currentLocked(), 0, nil
		}
		rv, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q: %v", opts.ResourceVersion, err))
		}
		sn, err := s.snapshotAt(rv)
		return sn, 0, err
	}
	if opts.ResourceVersion != "" {
		return nil, 0, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	rv, last, err := decodeContinue(opts.Continue)
	if err != nil {
		return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	if namespace != "" && last.Namespace != namespace {
		return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: it continues a list of namespace %q", last.Namespace))
	}
	sn, err := s.snapshotAt(rv)
	if err != nil {
		if apierrors.IsResourceExpired(err) {
			err = apierrors.NewResourceExpired(continueExpired)
		}
		return nil, 0, err
	}
	return sn, sn.after(last), nil
}

// continueExpired is the kube-apiserver's message for a continue token
// whose revision etcd has compacted.
const continueExpired = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter."

// List returns deep copies of the objects in namespace (all namespaces when
// empty) for which match returns true (all when match is nil), sorted by
// namespace and name, and the store's current resource version.
func (s *Store[T]) List(namespace string, match func(T) bool) (items []T, resourceVersion string) {
	page, err := s.ListPage(namespace, match, PageOptions{})
	if err != nil {
		// Without a limit, continue token or resource version there is
		// nothing to refuse.
		panic(fmt.Sprintf("memstore: List: %v", err))
	}
	return page.Items, page.ResourceVersion
}

// snapshotAt returns the state at rv: a kept snapshot, the current state or
// one rebuilt from the history; 410 Gone when there is none of these.
func (s *Store[T]) snapshotAt(rv uint64) (*snapshot[T], error) {
	if sn := s.keptSnapshot(rv); sn != nil {
		return sn, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if rv == s.rv {
		return s.currentLocked(), nil
	}
	if err := s.checkHistoryLocked(rv); err != nil {
		return nil, err
	}
	// Undo the events after rv, newest first.
	state := maps.Clone(s.objs)
	for i := s.hlen - 1; i >= 0; i-- {
		e := s.historyAt(i)
		if e.rv <= rv {
			break
		}
		switch e.typ {
		case watch.Added:
			delete(state, KeyOf(e.obj))
		case watch.Modified, watch.Deleted:
			state[KeyOf(e.prev)] = e.prev
		}
	}
	keys := slices.SortedFunc(maps.Keys(state), compareKeys)
	items := make([]T, len(keys))
	for i, k := range keys {
		items[i] = state[k]
	}
	return &snapshot[T]{rv: rv, items: items}, nil
}

// currentLocked returns the snapshot of the current state, building it if
// the store changed since the last one. The caller holds s.mu, for reading
// or writing.
func (s *Store[T]) currentLocked() *snapshot[T] {
	s.curMu.Lock()
	defer s.curMu.Unlock()
	if s.cur != nil && s.cur.rv == s.rv {
		return s.cur
	}
	s.syncOrderLocked()
	items := make([]T, len(s.order))
	for i, k := range s.order {
		items[i] = s.objs[k]
	}
	s.cur = &snapshot[T]{rv: s.rv, items: items}
	return s.cur
}

// The store keeps the keys of its objects in order, so that a snapshot does
// not sort them each time. Writers only note which keys they added and how
// many they removed; the order is brought up to date when a snapshot is
// next built, by merging the sorted additions in. Writers hold s.mu for
// writing; the order is updated under s.mu for reading and s.curMu.

// noteAddedLocked records that k was added. Once more keys wait than the
// store holds objects, the order is rebuilt from scratch instead.
func (s *Store[T]) noteAddedLocked(k Key) {
	if s.orderRebuild {
		return
	}
	s.orderAdds = append(s.orderAdds, k)
	if len(s.orderAdds) > len(s.objs)+burstSlack {
		s.orderAdds, s.orderRebuild = nil, true
	}
}

// syncOrderLocked brings s.order up to date with s.objs.
func (s *Store[T]) syncOrderLocked() {
	switch {
	case s.orderRebuild:
		s.order = slices.SortedFunc(maps.Keys(s.objs), compareKeys)
	case len(s.orderAdds) == 0 && s.orderDels == 0:
		return
	default:
		present := func(k Key) bool { _, ok := s.objs[k]; return ok }
		base := s.order
		if s.orderDels > 0 {
			base = slices.DeleteFunc(base, func(k Key) bool { return !present(k) })
		}
		adds := slices.DeleteFunc(s.orderAdds, func(k Key) bool { return !present(k) })
		slices.SortFunc(adds, compareKeys)
		adds = slices.Compact(adds)
		merged := make([]Key, 0, len(base)+len(adds))
		i, j := 0, 0
		for i < len(base) && j < len(adds) {
			switch c := compareKeys(base[i], adds[j]); {
			case c < 0:
				merged = append(merged, base[i])
				i++
			case c > 0:
				merged = append(merged, adds[j])
				j++
			default: // deleted and added again
				merged = append(merged, base[i])
				i++
				j++
			}
		}
		merged = append(merged, base[i:]...)
		s.order = append(merged, adds[j:]...)
	}
	s.orderAdds, s.orderDels, s.orderRebuild = s.orderAdds[:0], 0, false
}

// keptSnapshot returns the snapshot kept for rv, if any and not expired.
func (s *Store[T]) keptSnapshot(rv uint64) *snapshot[T] {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	k, ok := s.kept[rv]
	if !ok {
		return nil
	}
	if s.now().Sub(k.since) >= s.snapshotTTL {
		delete(s.kept, rv)
		return nil
	}
	return k.snap
}

// keepSnapshot keeps sn for the continue tokens of a paged list, dropping
// expired snapshots and, when there are too many, the oldest.
func (s *Store[T]) keepSnapshot(sn *snapshot[T]) {
	if s.maxSnapshots == 0 {
		return
	}
	now := s.now()
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if _, ok := s.kept[sn.rv]; ok {
		return
	}
	var oldest uint64
	var oldestSince time.Time
	for rv, k := range s.kept {
		switch {
		case now.Sub(k.since) >= s.snapshotTTL:
			delete(s.kept, rv)
		case oldestSince.IsZero() || k.since.Before(oldestSince) || k.since.Equal(oldestSince) && rv < oldest:
			oldest, oldestSince = rv, k.since
		}
	}
	if len(s.kept) >= s.maxSnapshots {
		delete(s.kept, oldest)
	}
	s.kept[sn.rv] = keptSnapshot[T]{snap: sn, since: now}
}

type keptSnapshot[T Object] struct {
	snap  *snapshot[T]
	since time.Time
}
