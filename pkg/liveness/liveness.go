// Package liveness keeps when each pulled Cluster's courier-agent was last
// heard, and its report interval (docs/design.md#pull-delivery,
// docs/scale-out.md "Liveness"): a heartbeat costs no write upstream.
// Each replica keeps what it heard in memory and writes it, at most as
// often as readers need, into digests of its own that every replica
// reads (digest.go). The Clusters' status objects (pkg/clusterstatus) ask
// it for the newest heartbeat; the agent's side is pkg/agent/report.
package liveness

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/internal/statusobjects"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// The write rules of the digests (see digest.go for their format). A
// replica rewrites its digest of a shard when, for some Cluster of it,
// this replica heard the agent later than its digest says and the record
// it would replace is RefreshIntervals of that agent's intervals old (or
// the Cluster is new to every digest); the rewrite carries every record of
// the shard, so with many Clusters a digest is written about once per
// report interval, and never more than once per MinDigestPeriod. A reader
// then sees a live agent's newest record at most RefreshIntervals
// intervals old plus Tick and the write's latency: below the
// rowstatus.MissedIntervals (3) that make it Unreachable.
const (
	// MinInterval and MaxInterval bound the report interval an agent may
	// declare: below a second every heartbeat would be a write upstream,
	// beyond an hour a silent agent would go unnoticed for hours.
	MinInterval = time.Second
	MaxInterval = time.Hour
	// RefreshIntervals is how old, in the agent's report intervals, a
	// record may get in this replica's digest before it is replaced.
	RefreshIntervals = 2
	// MinDigestPeriod is the least time between two writes of one digest.
	MinDigestPeriod = time.Second
	// Tick is how often the writer looks for digests to write.
	Tick = 250 * time.Millisecond
	// Retention is how long a record of an agent that is no longer heard
	// is kept (it says when the agent was last heard). Older records are
	// dropped; the report's _heartbeat still tells the time of the last
	// status change.
	Retention = 24 * time.Hour
	// cleanupPeriod is how often the digests of replicas that are gone are
	// looked for.
	cleanupPeriod = time.Minute
	// flushTimeout bounds the final write on shutdown.
	flushTimeout = 3 * time.Second
)

// Options configure a Tracker.
type Options struct {
	// Namespace holds the digests: Courier's own namespace.
	Namespace string
	// Identity names this replica's digests (NewIdentity).
	Identity string
	// Client writes them.
	Client typedcorev1.ConfigMapsGetter
	// Informer watches every replica's digests (NewInformer).
	Informer cache.SharedIndexInformer
	// Clock is the real clock when nil.
	Clock clock.WithTicker
	// OnChange is told a Cluster whose deadline may have moved other than
	// forward by a heartbeat: heard again after its deadline passed, or
	// with another interval.
	OnChange func(types.NamespacedName)
	// Pulled tells whether a Cluster is still pulled; records of others
	// are dropped. Nil keeps them until Retention.
	Pulled func(types.NamespacedName) bool
}

// digest is one digest object as read (or last written by this replica).
type digest struct {
	resourceVersion string
	replica         string
	records         map[types.NamespacedName]heard
}

// Tracker keeps when each pulled Cluster's agent was last heard: this
// replica's memory, written to its digests at most as often as readers
// need, and every replica's digests. It is safe for concurrent use.
type Tracker struct {
	o Options

	mu sync.Mutex
	// mine is what this replica heard.
	mine map[types.NamespacedName]heard
	// digests are every digest by object name; newest is, per Cluster,
	// the newest record among them.
	digests map[string]*digest
	newest  map[types.NamespacedName]heard
	// written is when each of this replica's digests was last written.
	written map[int]time.Time
}

// NewInformer returns an informer of the digests in namespace,
// selected by Label.
func NewInformer(client kubernetes.Interface, namespace string, resync time.Duration) cache.SharedIndexInformer {
	return statusobjects.Informer(client, namespace, Label, resync)
}

// New returns a Tracker over o.Informer.
func New(o Options) (*Tracker, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	statusobjects.RegisterMetrics()
	l := &Tracker{o: o, mine: map[types.NamespacedName]heard{}, digests: map[string]*digest{},
		newest: map[types.NamespacedName]heard{}, written: map[int]time.Time{}}
	_, err := o.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    l.put,
		UpdateFunc: func(_, obj any) { l.put(obj) },
		DeleteFunc: l.remove,
	})
	return l, err
}

// HasSynced reports whether every digest has been read once.
func (l *Tracker) HasSynced() bool { return l.o.Informer.HasSynced() }

// Heard records that a Cluster's agent was heard now, with its report
// interval. It writes nothing.
func (l *Tracker) Heard(c types.NamespacedName, interval time.Duration) {
	now := l.o.Clock.Now()
	l.mu.Lock()
	prev := l.lastLocked(c)
	l.mine[c] = heard{at: now, interval: interval}
	l.mu.Unlock()
	if l.o.OnChange != nil && (prev.at.IsZero() || !now.Before(prev.deadline()) || prev.interval != interval) {
		l.o.OnChange(c)
	}
}

// Last returns when a Cluster's agent was last heard by any replica, and
// its interval then.
func (l *Tracker) Last(c types.NamespacedName) (at time.Time, interval time.Duration, ok bool) {
	l.mu.Lock()
	h := l.lastLocked(c)
	l.mu.Unlock()
	return h.at, h.interval, !h.at.IsZero()
}

func (l *Tracker) lastLocked(c types.NamespacedName) heard {
	h, n := l.mine[c], l.newest[c]
	if n.newer(h) {
		return n
	}
	return h
}

// put takes in a digest from the informer (or as this replica wrote it).
func (l *Tracker) put(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || !strings.HasPrefix(cm.Name, namePrefix) {
		return
	}
	d := &digest{resourceVersion: cm.ResourceVersion, replica: cm.Annotations[AnnotationReplica], records: decodeDigest(cm.Data[DigestKey])}
	l.replace(cm.Name, d)
}

func (l *Tracker) remove(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		l.replace(cm.Name, nil)
	}
}

// replace sets (nil: removes) a digest, recomputes the newest records of
// its Clusters and tells OnChange of those whose deadline moved other
// than forward, or that came back.
func (l *Tracker) replace(name string, d *digest) {
	now := l.o.Clock.Now()
	var changed []types.NamespacedName
	l.mu.Lock()
	old := l.digests[name]
	if d == nil {
		delete(l.digests, name)
	} else {
		l.digests[name] = d
	}
	touched := map[types.NamespacedName]bool{}
	for _, x := range []*digest{old, d} {
		if x != nil {
			for c := range x.records {
				touched[c] = true
			}
		}
	}
	for c := range touched {
		before := l.lastLocked(c)
		var n heard
		for _, x := range l.digests {
			if h, ok := x.records[c]; ok && h.newer(n) {
				n = h
			}
		}
		if n.at.IsZero() {
			delete(l.newest, c)
		} else {
			l.newest[c] = n
		}
		after := l.lastLocked(c)
		if after != before && (before.at.IsZero() || !now.Before(before.deadline()) || after.deadline().Before(before.deadline())) {
			changed = append(changed, c)
		}
	}
	l.mu.Unlock()
	if l.o.OnChange != nil {
		for _, c := range changed {
			l.o.OnChange(c)
		}
	}
}

// Run writes this replica's digests as they fall due, and removes those
// of replicas that are gone, until ctx is done.
func (l *Tracker) Run(ctx context.Context) {
	tick := l.o.Clock.NewTicker(Tick)
	defer tick.Stop()
	lastCleanup := l.o.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		l.writeDue(ctx, false)
		if now := l.o.Clock.Now(); now.Sub(lastCleanup) >= cleanupPeriod && l.HasSynced() {
			lastCleanup = now
			l.cleanup(ctx)
		}
	}
}

// Flush writes every digest of this replica whose records are behind its
// memory, due or not: on shutdown, so that a restart or another replica
// knows what this one heard last.
func (l *Tracker) Flush() {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	l.writeDue(ctx, true)
}

// writeDue writes the digests that are due (all behind ones when final).
func (l *Tracker) writeDue(ctx context.Context, final bool) {
	for shard, records := range l.due(final) {
		if err := l.write(ctx, shard, records); err != nil {
			klog.FromContext(ctx).Error(err, "Writing a liveness digest failed; retrying", "digest", DigestName(l.o.Identity, shard))
		}
	}
}

// due returns the records of each of this replica's digests to write now.
func (l *Tracker) due(final bool) map[int]map[types.NamespacedName]heard {
	now := l.o.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	shards := map[int]bool{}
	for c, h := range l.mine {
		s := digestShard(c)
		if shards[s] || (!final && now.Sub(l.written[s]) < MinDigestPeriod) {
			continue
		}
		ref, ok := l.recordedLocked(s, c)
		if !ok {
			ref = l.newest[c] // new to this digest: another's may do for now
		}
		if !h.newer(ref) {
			continue
		}
		if final || ref.at.IsZero() || ref.interval != h.interval || !now.Before(ref.at.Add(RefreshIntervals*h.interval)) {
			shards[s] = true
		}
	}
	out := map[int]map[types.NamespacedName]heard{}
	for s := range shards {
		out[s] = map[types.NamespacedName]heard{}
	}
	if len(out) == 0 {
		return out
	}
	// Records are pruned as their digest is written: Pulled is a lookup
	// per record, not for every record on every tick.
	for c, h := range l.mine {
		recs, ok := out[digestShard(c)]
		if !ok {
			continue
		}
		if now.Sub(h.at) > Retention || (l.o.Pulled != nil && !l.o.Pulled(c)) {
			delete(l.mine, c)
			continue
		}
		recs[c] = h
	}
	return out
}

// recordedLocked returns this replica's record of c in its digest s.
func (l *Tracker) recordedLocked(s int, c types.NamespacedName) (heard, bool) {
	d := l.digests[DigestName(l.o.Identity, s)]
	if d == nil {
		return heard{}, false
	}
	h, ok := d.records[c]
	return h, ok
}

// write replaces this replica's digest of a shard with records; this
// replica is its only writer, so the write is unconditional.
func (l *Tracker) write(ctx context.Context, shard int, records map[types.NamespacedName]heard) error {
	l.mu.Lock()
	l.written[shard] = l.o.Clock.Now()
	l.mu.Unlock()
	cms := l.o.Client.ConfigMaps(l.o.Namespace)
	name := DigestName(l.o.Identity, shard)
	if len(records) == 0 {
		err := cms.Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil {
			statusobjects.CountWrite("digest_delete")
		}
		if err == nil || apierrors.IsNotFound(err) {
			l.replace(name, nil)
			return nil
		}
		return err
	}
	fit(records)
	obj := newDigest(l.o.Namespace, l.o.Identity, shard, records)
	got, err := cms.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "courier"})
	if apierrors.IsNotFound(err) {
		got, err = cms.Create(ctx, obj, metav1.CreateOptions{FieldManager: "courier"})
	}
	if err != nil {
		return err
	}
	statusobjects.CountWrite("digest")
	l.put(got)
	return nil
}

// fit drops the oldest records until a digest stays under statusobjects.MaxDataBytes
// (at ~340 bytes a line, the longest names, a shard holds 2,700
// Clusters; at 48, 19,000).
func fit(records map[types.NamespacedName]heard) {
	size := 0
	for c := range records {
		size += len(c.Namespace) + len(c.Name) + 32
	}
	if size <= statusobjects.MaxDataBytes {
		return
	}
	keys := make([]types.NamespacedName, 0, len(records))
	for c := range records {
		keys = append(keys, c)
	}
	sort.Slice(keys, func(i, j int) bool { return records[keys[i]].at.Before(records[keys[j]].at) })
	for _, c := range keys {
		if size <= statusobjects.MaxDataBytes {
			return
		}
		size -= len(c.Namespace) + len(c.Name) + 32
		delete(records, c)
	}
}

// cleanup deletes the digests of other replicas none of whose records
// still matter: each is past Retention, of a Cluster no longer pulled, or
// superseded (another record of that Cluster is newer by more than
// rowstatus.MissedIntervals of its intervals, which a live replica's never falls
// behind). A live replica's digest is not deleted; a deletion that races
// with its write fails on the resourceVersion.
func (l *Tracker) cleanup(ctx context.Context) {
	for shard, records := range l.pruned() {
		if err := l.write(ctx, shard, records); err != nil {
			klog.FromContext(ctx).Error(err, "Writing a liveness digest failed; retrying", "digest", DigestName(l.o.Identity, shard))
		}
	}
	for name, rv := range l.stale() {
		err := l.o.Client.ConfigMaps(l.o.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err == nil {
			statusobjects.CountWrite("digest_delete")
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Error(err, "Deleting the liveness digest of a replica that is gone failed", "digest", name)
		}
	}
}

// pruned drops this replica's records past Retention or of Clusters no
// longer pulled, and returns the records of each digest that held one,
// to be written without them (a digest of silent agents is never due).
func (l *Tracker) pruned() map[int]map[types.NamespacedName]heard {
	now := l.o.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]map[types.NamespacedName]heard{}
	for c, h := range l.mine {
		if now.Sub(h.at) > Retention || (l.o.Pulled != nil && !l.o.Pulled(c)) {
			delete(l.mine, c)
			if _, ok := l.recordedLocked(digestShard(c), c); ok {
				out[digestShard(c)] = map[types.NamespacedName]heard{}
			}
		}
	}
	for c, h := range l.mine {
		if recs, ok := out[digestShard(c)]; ok {
			recs[c] = h
		}
	}
	return out
}

// stale returns the digests cleanup deletes, with their resourceVersions.
func (l *Tracker) stale() map[string]string {
	now := l.o.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for name, d := range l.digests {
		if d.replica == l.o.Identity {
			continue
		}
		matters := false
		for c, h := range d.records {
			if now.Sub(h.at) > Retention || (l.o.Pulled != nil && !l.o.Pulled(c)) {
				continue
			}
			if !l.lastLocked(c).at.After(h.at.Add(rowstatus.MissedIntervals * h.interval)) {
				matters = true
				break
			}
		}
		if !matters {
			out[name] = d.resourceVersion
		}
	}
	return out
}
