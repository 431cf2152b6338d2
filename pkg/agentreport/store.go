package agentreport

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/copycontract"
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
	Liveness *Liveness
}

// DefaultLinger gathers an agent's burst of reports (it may send every
// row's status at once) into one write, for 25 ms of delay.
const DefaultLinger = 25 * time.Millisecond

// writeTimeout bounds one Cluster's write, retries included.
const writeTimeout = 30 * time.Second

// writeBackoff retries a write that lost a race with another replica's
// (409 Conflict), or found the object created or deleted meanwhile.
var writeBackoff = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.2}

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
	liveness    *Liveness

	mu sync.RWMutex
	// reports are the parsed reports by Cluster; byName maps a ConfigMap's
	// name to its Cluster, for deletions.
	reports map[types.NamespacedName]*Report
	byName  map[string]types.NamespacedName
	// byOwner files the reports' leftovers by owner, then Cluster.
	byOwner map[types.NamespacedName]map[types.NamespacedName][]copycontract.Leftover

	wmu    sync.Mutex
	queues map[types.NamespacedName]*queue
}

// queue is one Cluster's reports waiting to be written, and whether a
// writer runs for it.
type queue struct {
	writing bool
	next    *batch
}

// batch is the reports that one write carries; every Record that joined it
// waits for done and returns err.
type batch struct {
	rows map[string]Entry
	// leftovers replace the object's when not nil (Publish).
	leftovers []copycontract.Leftover
	interval  time.Duration
	heard     time.Time
	// replace: rows are every entry of a pushed Cluster (Publish), not
	// some of an agent's (Record).
	replace bool
	done    chan struct{}
	err     error
}

// NewInformer returns an informer of the report ConfigMaps in namespace,
// selected by Label: Courier never caches other ConfigMaps in full.
func NewInformer(client kubernetes.Interface, namespace string, resync time.Duration) cache.SharedIndexInformer {
	return labelledConfigMaps(client, namespace, Label, resync)
}

// labelledConfigMaps is an informer of the ConfigMaps in namespace that
// carry label=true, without their managed fields.
func labelledConfigMaps(client kubernetes.Interface, namespace, label string, resync time.Duration) cache.SharedIndexInformer {
	inf := corev1informers.NewFilteredConfigMapInformer(client, namespace, resync, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.LabelSelector = label + "=true"
	})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	return inf
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
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.liveness == nil {
		return nil, errors.New("agentreport: a Store needs a Liveness")
	}
	registerMetrics()
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
// heartbeat any replica heard (Liveness) when it is newer than the one the
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
// The heartbeat goes to Liveness, in memory: it never writes the report.
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

// drain writes a Cluster's batches one after another until none waits.
func (s *Store) drain(cluster types.NamespacedName, q *queue) {
	if s.linger > 0 {
		time.Sleep(s.linger)
	}
	for {
		s.wmu.Lock()
		b := q.next
		q.next = nil
		if b == nil {
			q.writing = false
			delete(s.queues, cluster)
			s.wmu.Unlock()
			return
		}
		s.wmu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		b.err = s.write(ctx, cluster, b)
		cancel()
		close(b.done)
	}
}

// write merges a batch into the Cluster's report object upstream. The
// first try starts from the informer's copy (no request when nothing
// changes); a retry GETs the object.
func (s *Store) write(ctx context.Context, cluster types.NamespacedName, b *batch) error {
	name := ObjectName(cluster)
	cms := s.client.ConfigMaps(s.namespace)
	var cur *corev1.ConfigMap
	if obj, ok, err := s.informer.GetIndexer().GetByKey(s.namespace + "/" + name); err == nil && ok {
		cur, _ = obj.(*corev1.ConfigMap)
	}
	first := true
	return retry.OnError(writeBackoff, retriable, func() error {
		if !first {
			got, err := cms.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				cur = nil
			case err != nil:
				return err
			default:
				cur = got
			}
		}
		first = false
		next, changed, err := s.merge(cur, cluster, b)
		if err != nil || !changed {
			return err
		}
		if cur == nil {
			_, err = cms.Create(ctx, next, metav1.CreateOptions{FieldManager: "courier"})
		} else {
			_, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: "courier"})
		}
		if err == nil {
			writesTotal.WithLabelValues(objectKind(b)).Inc()
		}
		return err
	})
}

// retriable: another replica wrote first, or created or deleted the
// object since it was read.
func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
}

// merge returns the report object with the batch's entries and heartbeat
// merged into cur (nil: none yet), entries of rows the Cluster no longer
// has left out, and whether it differs from cur.
func (s *Store) merge(cur *corev1.ConfigMap, cluster types.NamespacedName, b *batch) (*corev1.ConfigMap, bool, error) {
	if b.replace {
		var old *Report
		if cur != nil {
			old, _ = decode(cur)
		}
		r, changed := mergePublished(old, cluster, b)
		if !changed {
			return nil, false, nil
		}
		return s.object(cur, r)
	}
	r := &Report{Cluster: cluster, Rows: map[string]Entry{}}
	if cur != nil {
		if old, ok := decode(cur); ok {
			for k, v := range old.Rows {
				r.Rows[k] = v
			}
			r.Heartbeat = old.Heartbeat
		}
	}
	// An agent's report holds no leftovers: a pulled Cluster's copies are
	// its agent's, and what a former deliverer found of them goes.
	changed := cur == nil || (cur.Data[LeftoversKey] != "")
	for row, e := range b.rows {
		if prev, ok := r.Rows[row]; !ok || !sameStatus(prev, e) {
			changed = true
			r.Rows[row] = e
		}
	}
	if s.rows != nil {
		for row := range r.Rows {
			if c, ok := s.rows.ClusterOf(cluster.Namespace, row); !ok || c != cluster.Name {
				delete(r.Rows, row)
				changed = true
			}
		}
	}
	if !changed {
		return nil, false, nil
	}
	// A status write carries the heartbeat at no extra cost.
	r.Heartbeat = Heartbeat{LastHeard: metav1.NewMicroTime(b.heard), Interval: metav1.Duration{Duration: b.interval}}
	return s.object(cur, r)
}

// object returns the object of report r, to replace cur (nil: none yet).
func (s *Store) object(cur *corev1.ConfigMap, r *Report) (*corev1.ConfigMap, bool, error) {
	data, err := encode(r)
	if err != nil {
		return nil, false, err
	}
	next := newObject(s.namespace, r.Cluster, data)
	if cur != nil {
		next.ResourceVersion = cur.ResourceVersion
	}
	return next, true, nil
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
