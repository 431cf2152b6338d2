package clusterstatus

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/internal/statusobjects"
	"github.com/courier-dev/courier/pkg/liveness"
)

// Rows tells which Cluster a row belongs to, so that a report keeps
// entries only for rows its Cluster still has.
type Rows interface {
	ClusterOf(namespace, name string) (cluster string, ok bool)
}

// Options configure a Store.
type Options struct {
	// Namespace holds the report ConfigMaps: Courier's own namespace.
	Namespace string
	// Client writes them.
	Client typedcorev1.ConfigMapsGetter
	// Informer watches them (see NewInformer); the Store adds its handler.
	Informer cache.SharedIndexInformer
	// Rows prunes entries of rows that are gone; nil keeps every entry.
	Rows Rows
	// OnChange is told the Cluster whose report changed in the informer's
	// cache (written by this replica or another).
	OnChange func(cluster types.NamespacedName)
	// OnLeftovers is told each owner whose leftover copies in some
	// Cluster's object changed in the informer's cache (Leftovers).
	OnLeftovers func(owner types.NamespacedName)
	// Clock stamps heartbeats; the real clock when nil.
	Clock clock.PassiveClock
	// Linger is how long the first report for a Cluster waits for more
	// before it is written, so that an agent's burst of row reports costs
	// one write (see Record).
	Linger time.Duration
	// Liveness keeps the heartbeats apart from the reports (required).
	Liveness *liveness.Tracker
	// MaxWrites bounds the writes in flight at once, over every Cluster;
	// DefaultMaxWrites when 0.
	MaxWrites int
}

// DefaultLinger gathers an agent's burst of reports (it may send every
// row's status at once) into one write, for 25 ms of delay.
const DefaultLinger = 25 * time.Millisecond

// Store records agents' reports in the upstream cluster and serves them
// from an informer's cache. It is safe for concurrent use.
type Store struct {
	namespace string
	client    typedcorev1.ConfigMapsGetter
	informer  cache.SharedIndexInformer
	rows      Rows
	onChange  func(types.NamespacedName)
	// onLeftovers: Options.OnLeftovers.
	onLeftovers func(types.NamespacedName)
	clock       clock.PassiveClock
	linger      time.Duration
	liveness    *liveness.Tracker

	mu sync.RWMutex
	// reports are the parsed reports by Cluster; byName maps a ConfigMap's
	// name to its Cluster, for deletions.
	reports map[types.NamespacedName]*Report
	byName  map[string]types.NamespacedName
	// byOwner files the reports' leftovers by owner, then Cluster.
	byOwner map[types.NamespacedName]map[types.NamespacedName][]copycontract.Leftover

	wmu    sync.Mutex
	queues map[types.NamespacedName]*queue
	// slots holds one token per write in flight (Options.MaxWrites).
	slots chan struct{}
}

// NewInformer returns an informer of the report ConfigMaps in namespace,
// selected by Label: Courier never caches other ConfigMaps in full.
func NewInformer(client kubernetes.Interface, namespace string, resync time.Duration) cache.SharedIndexInformer {
	return statusobjects.Informer(client, namespace, Label, resync)
}

// New returns a Store over o.Informer, which must not have started yet
// when OnChange must see every report.
func New(o Options) (*Store, error) {
	s := &Store{
		namespace:   o.Namespace,
		client:      o.Client,
		informer:    o.Informer,
		rows:        o.Rows,
		onChange:    o.OnChange,
		onLeftovers: o.OnLeftovers,
		clock:       o.Clock,
		linger:      o.Linger,
		liveness:    o.Liveness,
		reports:     map[types.NamespacedName]*Report{},
		byName:      map[string]types.NamespacedName{},
		byOwner:     map[types.NamespacedName]map[types.NamespacedName][]copycontract.Leftover{},
		queues:      map[types.NamespacedName]*queue{},
		slots:       make(chan struct{}, cmp.Or(o.MaxWrites, DefaultMaxWrites)),
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.liveness == nil {
		return nil, errors.New("clusterstatus: a Store needs a liveness.Tracker")
	}
	statusobjects.RegisterMetrics()
	if _, err := o.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.put,
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*corev1.ConfigMap)
			n, _ := obj.(*corev1.ConfigMap)
			if o == nil || n == nil || o.ResourceVersion != n.ResourceVersion {
				s.put(obj)
			}
		},
		DeleteFunc: s.remove,
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// HasSynced reports whether the reports (and the liveness digests) have
// been read once.
func (s *Store) HasSynced() bool {
	return s.informer.HasSynced() && s.liveness.HasSynced()
}

// Report returns the last report of a Cluster's agent, with the newest
// heartbeat any replica heard (liveness.Tracker) when it is newer than the one the
// report was written with. The report is shared and must not be
// modified.
func (s *Store) Report(cluster types.NamespacedName) (*Report, bool) {
	s.mu.RLock()
	r, ok := s.reports[cluster]
	s.mu.RUnlock()
	at, interval, heard := s.liveness.Last(cluster)
	if !heard || (ok && !at.After(r.Heartbeat.LastHeard.Time)) {
		return r, ok
	}
	out := &Report{Cluster: cluster, Heartbeat: Heartbeat{LastHeard: metav1.NewMicroTime(at), Interval: metav1.Duration{Duration: interval}}}
	if ok {
		out.Rows = r.Rows
	}
	return out, true
}

// Clusters returns the Clusters that have a report.
func (s *Store) Clusters() []types.NamespacedName {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]types.NamespacedName, 0, len(s.reports))
	for c := range s.reports {
		out = append(out, c)
	}
	return out
}

func (s *Store) put(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	r, ok := decode(cm)
	s.mu.Lock()
	old, had := s.byName[cm.Name]
	var owners []types.NamespacedName
	var prev []copycontract.Leftover // the leftovers r replaces
	if had {
		if ok && old == r.Cluster {
			prev = s.reports[old].Leftovers
		} else {
			owners = s.indexLeftoversLocked(old, s.reports[old].Leftovers, nil)
		}
		delete(s.reports, old)
		delete(s.byName, cm.Name)
	}
	if ok {
		owners = append(owners, s.indexLeftoversLocked(r.Cluster, prev, r.Leftovers)...)
		s.reports[r.Cluster] = r
		s.byName[cm.Name] = r.Cluster
	}
	s.mu.Unlock()
	s.notifyLeftovers(owners)
	if had && (!ok || old != r.Cluster) {
		s.notify(old)
	}
	if ok {
		s.notify(r.Cluster)
	}
}

func (s *Store) remove(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	s.mu.Lock()
	c, had := s.byName[cm.Name]
	var owners []types.NamespacedName
	if had {
		owners = s.indexLeftoversLocked(c, s.reports[c].Leftovers, nil)
		delete(s.reports, c)
		delete(s.byName, cm.Name)
	}
	s.mu.Unlock()
	s.notifyLeftovers(owners)
	if had {
		s.notify(c)
	}
}

func (s *Store) notify(c types.NamespacedName) {
	if s.onChange != nil {
		s.onChange(c)
	}
}

// Record keeps what a Cluster's agent reported for one row, with the
// heartbeat that every report is, and returns once it is written upstream
// (or found current there), or ctx is done.
//
// The heartbeat goes to the liveness.Tracker, in memory: it never writes the report.
// The report is written only when the row's status changed (sameStatus):
// a report that repeats the status upstream returns at once. Changes for
// one Cluster are coalesced: while a write for the Cluster is in flight
// (or lingering, see Options.Linger), every Record for it joins the next
// write, so an agent that sends all its rows at once costs one or two
// writes, not one per row. A write re-reads the object and tries again
// when it lost a race with another replica's write (409 Conflict).
func (s *Store) Record(ctx context.Context, cluster types.NamespacedName, row string, e Entry, interval time.Duration) error {
	s.liveness.Heard(cluster, interval)
	if s.current(cluster, row, e) {
		return nil
	}
	s.wmu.Lock()
	q := s.queues[cluster]
	if q == nil {
		q = &queue{}
		s.queues[cluster] = q
	}
	if q.next == nil {
		q.next = &batch{rows: map[string]Entry{}, done: make(chan struct{})}
	}
	b := q.next
	b.rows[row] = e
	b.interval = interval
	b.heard = s.clock.Now()
	if !q.writing {
		q.writing = true
		go s.drain(cluster, q)
	}
	s.wmu.Unlock()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Holds reports whether the Cluster's report upstream (as the informer
// has it) already says of row what e says.
func (s *Store) Holds(cluster types.NamespacedName, row string, e Entry) bool {
	return s.current(cluster, row, e)
}

// current reports whether the report upstream (as the informer has it)
// already holds what e says of row.
func (s *Store) current(cluster types.NamespacedName, row string, e Entry) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.reports[cluster]
	if !ok {
		return false
	}
	prev, ok := r.Rows[row]
	return ok && sameStatus(prev, e)
}

// Delete removes a Cluster's report object, if there is one: its Cluster
// is gone or no longer pulled.
func (s *Store) Delete(ctx context.Context, cluster types.NamespacedName) error {
	err := s.client.ConfigMaps(s.namespace).Delete(ctx, ObjectName(cluster), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
