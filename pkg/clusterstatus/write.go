package clusterstatus

// Writing report objects: one writer per Cluster at a time, gathering what
// arrives while it lingers or waits into its next write, and a bound on
// the writes in flight over every Cluster.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/internal/statusobjects"
)

// DefaultMaxWrites is how many report objects are written at once.
//
// A kube-apiserver allows 100 streams per HTTP/2 connection unless
// --http2-max-streams-per-connection says otherwise, and client-go's
// transport dials another TLS connection for a request that finds its
// connections full. One writer per Cluster, limited only by the writers'
// limiter (burst 200), sent up to 200 writes at once after a change of
// every source: within one second a single replica dialed 127 new
// connections to the upstream, and three replicas 120, 81 and 11 (ss, in
// `make bench`'s scale-out case at 1,000 Clusters), each a TLS handshake
// on both sides, 3 to 4 % of each replica's CPU over the change.
// 16 writes in flight are more than the limiter's 100 a second needs at
// the upstream's latency, and leave room on one connection beside the
// informers' watches, the Lease renewals (16 at once) and the kubeconfig
// reads (one per copy worker). A Cluster waiting for a slot keeps
// gathering its changes into the write it is waiting with.
const DefaultMaxWrites = 16

// writeTimeout bounds one Cluster's write, retries included.
const writeTimeout = 30 * time.Second

// writeBackoff retries a write that lost a race with another replica's
// (409 Conflict), or found the object created or deleted meanwhile.
var writeBackoff = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.2}

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

// drain writes a Cluster's batches one after another until none waits.
// Each write takes one of the Store's slots first (DefaultMaxWrites); the
// batch is taken only once the slot is held, so that what arrives while
// the Cluster waits for one joins the same write.
func (s *Store) drain(cluster types.NamespacedName, q *queue) {
	if s.linger > 0 {
		time.Sleep(s.linger)
	}
	for {
		s.wmu.Lock()
		if q.next == nil {
			q.writing = false
			delete(s.queues, cluster)
			s.wmu.Unlock()
			return
		}
		s.wmu.Unlock()
		s.slots <- struct{}{}
		s.wmu.Lock()
		b := q.next // not nil: only this drain takes it
		q.next = nil
		s.wmu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		b.err = s.write(ctx, cluster, b)
		cancel()
		<-s.slots
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
			statusobjects.CountWrite(objectKind(b))
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
