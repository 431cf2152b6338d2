package clusterstatus

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/copycontract"
)

// Pushed Clusters (docs/design.md#scale-out): the replica that delivers to a
// pushed Cluster -- the holder of its bucket, or the leader without
// sharding -- keeps the statuses its engine recorded for the Cluster's rows
// in the same object a pulled Cluster's agent reports to, so that every
// replica serves the deliverer's word and a restart or a hand-over loses
// nothing. The object is the same ConfigMap (ObjectName, Label), without
// the heartbeat key: a pushed Cluster's liveness is its bucket Lease, not
// a report. Keeping one format and one name for both ways of delivery lets
// a Cluster change way without a second object, and leaves the objects an
// earlier version wrote readable as they are.

// EntryOf is the entry of an engine's record of a row: its status fields,
// the message cut to MaxMessageBytes. It holds no data of the copy.
func EntryOf(st copycontract.Status) Entry {
	return Entry{
		Phase:                 st.Phase,
		Message:               truncate(st.Message, MaxMessageBytes),
		SyncedResourceVersion: st.SyncedResourceVersion,
		LastSyncTime:          st.LastSyncTime,
	}
}

// Publish keeps the statuses the deliverer of a pushed Cluster recorded,
// rows being every row of the Cluster that has a record (by row name), and
// returns at once: the object is written in the background.
//
// Nothing is written when every entry of rows is already upstream
// (samePublished): a pass that changed nothing, a resync or a hand-over to a
// replica that finds what its predecessor recorded costs no request.
// Otherwise rows replace the Cluster's entries, so entries of rows the
// Cluster no longer has go with the next change and never cost a write of
// their own. Publishes for one Cluster are coalesced as Record's are: the
// latest replaces a batch still waiting, so a burst of passes over one
// Cluster is one or two writes, never one per row.
//
// leftovers are the Cluster's leftover copies (LeftoversKey), kept the same
// way: replaced as a whole, written only when they differ from what is
// upstream. nil leaves the object's as they are: the deliverer has not
// swept the Cluster since it gained it, and what its predecessor found
// stays until it has.
func (s *Store) Publish(cluster types.NamespacedName, rows map[string]Entry, leftovers []copycontract.Leftover) {
	for i := range leftovers {
		leftovers[i].Message = truncate(leftovers[i].Message, MaxMessageBytes)
	}
	if s.publishedAlready(cluster, rows, leftovers) {
		return
	}
	if rows == nil {
		rows = map[string]Entry{}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	q := s.queues[cluster]
	if q == nil {
		q = &queue{}
		s.queues[cluster] = q
	}
	if q.next == nil {
		q.next = &batch{done: make(chan struct{})}
	}
	q.next.rows = rows
	if leftovers != nil { // unknown leftovers do not undo a waiting batch's
		q.next.leftovers = leftovers
	}
	q.next.replace = true
	if !q.writing {
		q.writing = true
		go s.drain(cluster, q)
	}
}

// publishedAlready reports whether the object upstream (as the informer
// has it) holds every entry of rows and the leftovers (unless nil), and no
// agent's heartbeat.
func (s *Store) publishedAlready(cluster types.NamespacedName, rows map[string]Entry, leftovers []copycontract.Leftover) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.reports[cluster]
	if !ok {
		return len(rows) == 0 && len(leftovers) == 0
	}
	if !r.Heartbeat.LastHeard.IsZero() {
		return false
	}
	if leftovers != nil && !sameLeftovers(r.Leftovers, leftovers) {
		return false
	}
	for row, e := range rows {
		if prev, ok := r.Rows[row]; !ok || !samePublished(prev, e) {
			return false
		}
	}
	return true
}

// samePublished reports whether a deliverer's entry e says nothing new
// over the stored prev: sameStatus without the lastSyncTime step. A new
// holder, or a restarted replica, confirms every copy current at its first
// pass and records that time; writing it would make every hand-over
// rewrite the objects of a whole bucket, for a time that says only when
// a replica last started. The stored time (when a deliverer first found
// the copy synced) stays.
func samePublished(prev, e Entry) bool {
	prev.LastSyncTime, e.LastSyncTime = nil, nil
	return sameStatus(prev, e)
}

// mergePublished returns the report of a batch of Publish over the report
// cur holds (nil: none), and whether it is worth a write (see Publish).
func mergePublished(old *Report, cluster types.NamespacedName, b *batch) (*Report, bool) {
	r := &Report{Cluster: cluster, Rows: make(map[string]Entry, len(b.rows)), Leftovers: b.leftovers}
	changed := old == nil && (len(b.rows) > 0 || len(b.leftovers) > 0)
	if old != nil && !old.Heartbeat.LastHeard.IsZero() {
		changed = true // an agent's report: the Cluster is pushed now
	}
	switch {
	case old != nil && b.leftovers == nil:
		r.Leftovers = old.Leftovers // not swept yet: the object's stay
	case old != nil && sameLeftovers(old.Leftovers, b.leftovers):
		r.Leftovers = old.Leftovers // keeps what is upstream, cut messages
	case old != nil:
		changed = true
	}
	for row, e := range b.rows {
		r.Rows[row] = e
		if old != nil {
			if prev, ok := old.Rows[row]; !ok || !samePublished(prev, e) {
				changed = true
			} else {
				r.Rows[row] = prev // keeps what is upstream, cut message and time
			}
		}
	}
	return r, changed
}

// objectKind is the object label of courier_agent_status_writes_total
// for a batch's write: status for a pushed Cluster's, report for an
// agent's.
func objectKind(b *batch) string {
	if b.replace {
		return "status"
	}
	return "report"
}
