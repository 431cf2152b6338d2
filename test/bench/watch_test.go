package bench

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// arrivalKey is one downstream object with one value of its round key.
type arrivalKey struct {
	ns, name, value string
}

// watcher records when each Secret labelled benchLabel was first seen
// downstream with each value of its round key. It runs one informer per
// downstream kube-apiserver, selected by that label, so the resolution is
// that of watch delivery (not of a polling interval) and the cost does not
// grow with the number of simulated clusters. One wait at a time: the
// arrivals it still needs are counted down as they come, so waiting for
// 10,000 copies costs the benchmark process no more than receiving them.
type watcher struct {
	mu      sync.Mutex
	seen    map[arrivalKey]time.Time
	pending map[arrivalKey]bool // the current wait's keys not seen yet
	done    chan struct{}       // closed when pending becomes empty
}

func startWatcher(t *testing.T) *watcher {
	t.Helper()
	w := &watcher{seen: map[arrivalKey]time.Time{}}
	stop := make(chan struct{})
	var factories []informers.SharedInformerFactory
	t.Cleanup(func() {
		close(stop)
		for _, f := range factories {
			f.Shutdown()
		}
	})
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Fatal(err)
		}
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchLabel }))
		inf := f.Core().V1().Secrets().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    w.observe,
			UpdateFunc: func(_, obj any) { w.observe(obj) },
		}); err != nil {
			t.Fatal(err)
		}
		factories = append(factories, f)
		f.Start(stop)
		for typ, ok := range f.WaitForCacheSync(stop) {
			if !ok {
				t.Fatalf("watching %v in %s did not sync", typ, ds.Name)
			}
		}
	}
	return w
}

func (w *watcher) observe(obj any) {
	now := time.Now()
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	k := arrivalKey{ns: s.Namespace, name: s.Name, value: string(s.Data[roundKey])}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.seen[k]; dup {
		return
	}
	w.seen[k] = now
	if w.pending[k] {
		delete(w.pending, k)
		if len(w.pending) == 0 {
			close(w.done)
		}
	}
}

// wait returns, once every key has arrived, the time from t0 to each
// arrival (an arrival before t0 counts as 0), and forgets those keys so
// that the record does not grow round after round.
func (w *watcher) wait(keys []arrivalKey, t0 time.Time, timeout time.Duration) ([]time.Duration, error) {
	w.mu.Lock()
	w.pending, w.done = map[arrivalKey]bool{}, make(chan struct{})
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
		var example arrivalKey
		for k := range w.pending {
			example = k
			break
		}
		w.pending = nil
		return nil, fmt.Errorf("%d of %d copies with %s=%s did not arrive within %s (e.g. %s/%s)",
			n, len(keys), roundKey, keys[0].value, timeout, example.ns, example.name)
	}
	w.pending = nil
	out := make([]time.Duration, 0, len(keys))
	for _, k := range keys {
		out = append(out, max(w.seen[k].Sub(t0), 0))
		delete(w.seen, k)
	}
	return out, nil
}
