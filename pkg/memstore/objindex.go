package memstore

import "slices"

// The objects of a store with a watch index (WithWatchIndex) are indexed
// by the same field, so that a watcher pinned to one value is handed its
// initial events (a watch-list, or a watch from resourceVersion "" or
// "0") from that value's objects alone: every courier-agent starts with a
// watch-list of its own Cluster's rows, and looking at every row for each
// of them would cost the rows times the agents.

// indexPutLocked files stored, now held under k, under its index value,
// and takes the version it replaces (old, if had) out of its own.
func (s *Store[T]) indexPutLocked(k Key, old T, had bool, stored T) {
	if s.indexOf == nil {
		return
	}
	v := s.indexOf(stored)
	if had {
		if ov := s.indexOf(old); ov != v {
			s.indexDropLocked(k, ov)
		}
	}
	m := s.objIndex[v]
	if m == nil {
		m = map[Key]T{}
		s.objIndex[v] = m
	}
	m[k] = stored
}

// indexDeleteLocked takes old, the object held under k, out of the index.
func (s *Store[T]) indexDeleteLocked(k Key, old T) {
	if s.indexOf != nil {
		s.indexDropLocked(k, s.indexOf(old))
	}
}

func (s *Store[T]) indexDropLocked(k Key, v string) {
	if m := s.objIndex[v]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(s.objIndex, v)
		}
	}
}

// indexedLocked returns the objects whose index value is v, in key order.
func (s *Store[T]) indexedLocked(v string) []T {
	m := s.objIndex[v]
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}
