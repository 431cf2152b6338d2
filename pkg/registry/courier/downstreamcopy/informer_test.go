package downstreamcopy

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// TestInformer runs a client-go informer (its reflector uses watch-list when
// the WatchListClient feature is on, as it is by default) straight against
// the storage and checks that it syncs and then follows every change, also
// when its watch is closed for being slow.
func TestInformer(t *testing.T) {
	tcs := []struct {
		name          string
		storeOptions  []memstore.Option
		namespace     string
		fieldSelector string
		labelSelector string
		// rounds of changes after the initial sync; each closes a slow
		// watch, and a reflector that must start over backs off for longer
		// every time.
		rounds int
	}{
		{name: "all namespaces", rounds: 4},
		{name: "namespace, label and field selectors", namespace: "fleet-default", fieldSelector: "status.phase=Synced", labelSelector: "team=a", rounds: 4},
		{name: "slow watch closed, resumed from the history", storeOptions: []memstore.Option{memstore.WithWatchBufferSize(1)}, rounds: 4},
		{name: "slow watch closed, history too short: starts over", storeOptions: []memstore.Option{memstore.WithWatchBufferSize(1), memstore.WithHistorySize(2)}, rounds: 2},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New[*courier.DownstreamCopy](tc.storeOptions...)
			store.Replace(fixtures())
			r := NewREST(store, nil)
			ctx, cancel := context.WithTimeout(ctxIn(tc.namespace), time.Minute)
			defer cancel()

			toInternal := func(o metav1.ListOptions) *metainternalversion.ListOptions {
				o.LabelSelector, o.FieldSelector = tc.labelSelector, tc.fieldSelector
				var out metainternalversion.ListOptions
				if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&o, &out, nil); err != nil {
					t.Errorf("converting %+v: %v", o, err)
				}
				return &out
			}
			var mu sync.Mutex
			// reading is held while a burst is written, when the store
			// closes slow watches: the informer then reads nothing, as a
			// reader too slow for the burst, whatever the machine's speed.
			var reading sync.Mutex
			slow := len(tc.storeOptions) > 0
			var lists int
			var watches []metav1.ListOptions
			lw := &cache.ListWatch{
				ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
					mu.Lock()
					lists++
					mu.Unlock()
					return r.List(ctx, toInternal(o))
				},
				WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
					mu.Lock()
					watches = append(watches, o)
					mu.Unlock()
					w, err := r.Watch(ctx, toInternal(o))
					if err != nil {
						return nil, err
					}
					return newPausableWatch(w, &reading), nil
				},
			}
			inf := cache.NewSharedIndexInformer(lw, &courier.DownstreamCopy{}, 0, cache.Indexers{})
			go inf.RunWithContext(ctx)
			syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
			defer syncCancel()
			if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
				t.Fatal("informer did not sync")
			}

			want := func() map[string]string {
				list, err := r.List(ctx, toInternal(metav1.ListOptions{}))
				if err != nil {
					t.Fatal(err)
				}
				m := map[string]string{}
				for _, it := range list.(*courier.DownstreamCopyList).Items {
					m[it.Namespace+"/"+it.Name] = it.ResourceVersion + " " + string(it.Status.Phase)
				}
				return m
			}
			have := func() map[string]string {
				m := map[string]string{}
				for _, o := range inf.GetStore().List() {
					it := o.(*courier.DownstreamCopy)
					m[it.Namespace+"/"+it.Name] = it.ResourceVersion + " " + string(it.Status.Phase)
				}
				return m
			}
			converge := func(step string) {
				t.Helper()
				deadline := time.Now().Add(20 * time.Second)
				for {
					w, h := want(), have()
					if reflect.DeepEqual(w, h) {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: informer holds\n%v\nstorage lists\n%v", step, h, w)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			converge("initial sync")

			// Rounds of bursts: many rows added, phases flipped (rows enter
			// and leave the field selector), rows deleted.
			phases := []courier.CopyPhase{courier.CopyPhaseSynced, courier.CopyPhasePending, courier.CopyPhaseConflict}
			for round := 0; round < tc.rounds; round++ {
				var objs []*courier.DownstreamCopy
				for i, o := range fixtures() {
					if (i+round)%4 == 3 {
						continue
					}
					o.Status.Phase = phases[(i+round)%len(phases)]
					objs = append(objs, o)
				}
				for i := 0; i < 30; i++ {
					o := row("fleet-default", fmt.Sprintf("burst.c%d.secret.s%d", round%2, i), "burst", "c1", "Secret", "s", phases[(i+round)%len(phases)], map[string]string{"team": "a"})
					objs = append(objs, o)
				}
				if slow {
					reading.Lock()
				}
				store.Replace(objs)
				if slow {
					reading.Unlock()
				}
				converge(fmt.Sprintf("round %d", round))
			}

			mu.Lock()
			defer mu.Unlock()
			if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
				if lists != 0 {
					t.Errorf("the reflector listed %d times; with watch-list it should only watch", lists)
				}
				if len(watches) == 0 || watches[0].SendInitialEvents == nil || !*watches[0].SendInitialEvents || !watches[0].AllowWatchBookmarks {
					t.Errorf("first watch %+v is not a watch-list request", watches)
				}
			}
			if slow && len(watches) < 2 {
				t.Errorf("%d watches: the slow watch was never closed", len(watches))
			}
		})
	}
}

// pausableWatch forwards a watch's events, waiting before each for reading
// to be free.
type pausableWatch struct {
	inner watch.Interface
	out   chan watch.Event
	done  chan struct{}
	stop  sync.Once
}

func newPausableWatch(inner watch.Interface, reading *sync.Mutex) *pausableWatch {
	p := &pausableWatch{inner: inner, out: make(chan watch.Event), done: make(chan struct{})}
	go func() {
		defer close(p.out)
		for {
			// Wait while a burst is being written.
			reading.Lock()
			reading.Unlock() //nolint:staticcheck // an empty section: only the wait matters

			var ev watch.Event
			var ok bool
			select {
			case ev, ok = <-inner.ResultChan():
			case <-p.done:
				return
			}
			if !ok {
				return
			}
			select {
			case p.out <- ev:
			case <-p.done:
				return
			}
		}
	}()
	return p
}

func (p *pausableWatch) ResultChan() <-chan watch.Event { return p.out }

func (p *pausableWatch) Stop() {
	p.stop.Do(func() {
		close(p.done)
		p.inner.Stop()
	})
}
