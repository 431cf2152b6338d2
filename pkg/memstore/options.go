package memstore

import "time"

// Option configures a Store.
type Option func(*config)

type config struct {
	historySize int // < 0: grows with the number of objects
	bufferSize  int // 0: grows with the number of objects
	snapshots   int
	snapshotTTL time.Duration
	initialRV   uint64
	now         func() time.Time
	// indexField and indexOf index watchers (see WithWatchIndex).
	indexField string
	indexOf    func(any) string
	// eventCopy makes a watcher's copy of an object (WithEventCopy).
	eventCopy func(any) any
}

// WithHistorySize fixes at n (at least 0) how many recent events are kept
// for watches that resume from a resource version. Without it the history
// grows with the number of objects; see Store.
func WithHistorySize(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.historySize = n
		}
	}
}

// WithWatchBufferSize fixes at n (at least 1) how many events may wait for
// one watcher, beyond its initial events, before the watcher is closed.
// Without it that limit grows with the number of objects; see Store.
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

// WithWatchIndex indexes watchers by one field of the objects, as the
// kube-apiserver's watch cache indexes its watchers by the field a
// selector pins (its "triggers"): a watch started with WatchIndexed(value)
// is only handed the events of objects whose field is value, before or
// after the change, so an event costs nothing for the watchers of other
// values -- not even evaluating their selectors. field names the field
// (e.g. "spec.cluster") for the REST layer; valueOf reads it.
//
// Use it for a field that many watchers pin, each to one value: every
// courier-agent watches its own Cluster's rows.
func WithWatchIndex[T Object](field string, valueOf func(T) string) Option {
	return func(c *config) {
		c.indexField = field
		c.indexOf = func(o any) string { return valueOf(o.(T)) }
	}
}

// WithEventCopy has each watcher's event hold copy(o) of a stored object o
// rather than a deep copy. copy must return a new top-level object -- the
// generic server's encoder sets the object's kind, and sets it back, on
// the object it encodes -- which may share everything it points to with o,
// since nothing a stored object points to is ever modified. Use it only
// for a store whose watchers' consumers read what they are sent and write
// at most the top-level object's own fields: the rows, whose watchers are
// the REST layer's (courier-agents', kubectl's) and whose events at
// 10,000 pulled Clusters were one deep copy per row per change.
func WithEventCopy[T Object](copy func(T) T) Option {
	return func(c *config) {
		c.eventCopy = func(o any) any { return copy(o.(T)) }
	}
}
