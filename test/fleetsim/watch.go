package fleetsim

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/test/localenv"
)

// ArrivalKey is one downstream object with one value of its round key.
type ArrivalKey struct {
	NS, Name, Value string
}

// Watcher records when each Secret selected by its label selector was
// first seen downstream with each value of its round key. It runs one
// informer per downstream kube-apiserver, so the resolution is that of
// watch delivery (not of a polling interval) and the cost does not grow
// with the number of simulated clusters. One Wait at a time: the arrivals
// it still needs are counted down as they come, so waiting for 10,000
// copies costs the test process no more than receiving them.
type Watcher struct {
	key string

	mu      sync.Mutex
	seen    map[ArrivalKey]time.Time
	pending map[ArrivalKey]bool // the current wait's keys not seen yet
	done    chan struct{}       // closed when pending becomes empty
	hook    func(ArrivalKey)

	events atomic.Int64 // adds and updates delivered, every value

	stop      chan struct{}
	factories []informers.SharedInformerFactory
}

// StartWatcher watches the Secrets matching selector on each downstream
// and reads their data key key. Stop it when done.
func StartWatcher(downstreams []*localenv.Cluster, selector, key string) (*Watcher, error) {
	w := &Watcher{key: key, seen: map[ArrivalKey]time.Time{}, stop: make(chan struct{})}
	for _, ds := range downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			w.Stop()
			return nil, err
		}
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
		inf := f.Core().V1().Secrets().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    w.observe,
			UpdateFunc: func(_, obj any) { w.observe(obj) },
		}); err != nil {
			w.Stop()
			return nil, err
		}
		w.factories = append(w.factories, f)
		f.Start(w.stop)
		for typ, ok := range f.WaitForCacheSync(w.stop) {
			if !ok {
				w.Stop()
				return nil, fmt.Errorf("watching %v in %s did not sync", typ, ds.Name)
			}
		}
	}
	return w, nil
}

// Stop ends the watches.
func (w *Watcher) Stop() {
	close(w.stop)
	for _, f := range w.factories {
		f.Shutdown()
	}
}

// OnArrival sets a function called (under the Watcher's lock: keep it
// short) with every first arrival of a key; nil removes it.
func (w *Watcher) OnArrival(f func(ArrivalKey)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hook = f
}

// Events is the number of adds and updates delivered so far.
func (w *Watcher) Events() int64 { return w.events.Load() }

func (w *Watcher) observe(obj any) {
	now := time.Now()
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	w.events.Add(1)
	k := ArrivalKey{NS: s.Namespace, Name: s.Name, Value: string(s.Data[w.key])}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.seen[k]; dup {
		return
	}
	w.seen[k] = now
	if w.hook != nil {
		w.hook(k)
	}
	if w.pending[k] {
		delete(w.pending, k)
		if len(w.pending) == 0 {
			close(w.done)
		}
	}
}

// Wait returns, once every key has arrived, the time from t0 to each
// arrival (an arrival before t0 counts as 0), and forgets those keys so
// that the record does not grow round after round.
func (w *Watcher) Wait(keys []ArrivalKey, t0 time.Time, timeout time.Duration) ([]time.Duration, error) {
	w.mu.Lock()
	w.pending, w.done = map[ArrivalKey]bool{}, make(chan struct{})
	for _, k := range keys {
		if _, ok := w.seen[k]; !ok {
			w.pending[k] = true
		}
	}
	if len(w.pending) == 0 {
		close(w.done)
	}
	done := w.done
	w.mu.Unlock()

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.pending); n > 0 {
		var example ArrivalKey
		for k := range w.pending {
			example = k
			break
		}
		w.pending = nil
		return nil, fmt.Errorf("%d of %d copies with %s=%s did not arrive within %s (e.g. %s/%s)",
			n, len(keys), w.key, keys[0].Value, timeout, example.NS, example.Name)
	}
	w.pending = nil
	out := make([]time.Duration, 0, len(keys))
	for _, k := range keys {
		out = append(out, max(w.seen[k].Sub(t0), 0))
		delete(w.seen, k)
	}
	return out, nil
}
