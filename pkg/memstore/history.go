package memstore

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// historyLimitLocked is how many events the history may hold.
func (s *Store[T]) historyLimitLocked() int {
	if s.historySize >= 0 {
		return s.historySize
	}
	return max(DefaultHistorySize, 2*s.peak+burstSlack)
}

// watchLimitLocked is how many events may wait for one watcher, beyond its
// initial events.
func (s *Store[T]) watchLimitLocked() int {
	if s.bufferSize > 0 {
		return s.bufferSize
	}
	return max(DefaultWatchBufferSize, 2*s.peak+burstSlack)
}

// recordLocked appends e to the history, growing the ring while it is below
// its limit and dropping the oldest event once it is full.
func (s *Store[T]) recordLocked(e event[T]) {
	limit := s.historyLimitLocked()
	if limit == 0 {
		return
	}
	if s.hlen == len(s.history) && len(s.history) < limit {
		grown := make([]event[T], min(limit, max(2*len(s.history), 64)))
		for i := 0; i < s.hlen; i++ {
			grown[i] = s.historyAt(i)
		}
		s.history, s.hstart = grown, 0
	}
	n := len(s.history)
	if s.hlen < n {
		s.history[(s.hstart+s.hlen)%n] = e
		s.hlen++
		return
	}
	s.history[s.hstart] = e
	s.hstart = (s.hstart + 1) % n
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
