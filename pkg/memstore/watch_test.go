package memstore

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

func TestWatchStart(t *testing.T) {
	added := func(name, v string, p courier.CopyPhase) ev {
		return ev{Type: watch.Added, Namespace: "ns", Name: name, RV: v, Phase: p}
	}
	bookmark := ev{Type: watch.Bookmark, RV: rv(4), InitialEventsEnd: true}
	tcs := []struct {
		name    string
		opts    *metainternalversion.ListOptions
		want    []ev
		wantErr func(error) bool
	}{
		{name: "nil options: current state", opts: nil, want: []ev{added("b", rv(2), "Pending")}},
		{name: "resourceVersion unset: current state", opts: &metainternalversion.ListOptions{}, want: []ev{added("b", rv(2), "Pending")}},
		{name: "resourceVersion 0: current state", opts: &metainternalversion.ListOptions{ResourceVersion: "0"}, want: []ev{added("b", rv(2), "Pending")}},
		{name: "sendInitialEvents=false, resourceVersion unset: from now", opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false)}},
		{name: "sendInitialEvents=false, resourceVersion 0: from now", opts: &metainternalversion.ListOptions{ResourceVersion: "0", SendInitialEvents: ptr.To(false)}},
		{name: "current resourceVersion: nothing to replay", opts: &metainternalversion.ListOptions{ResourceVersion: rv(4)}},
		{
			name: "oldest resourceVersion the history covers",
			opts: &metainternalversion.ListOptions{ResourceVersion: rv(1)},
			want: []ev{
				added("b", rv(2), "Pending"),
				{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(3), Phase: "Synced"},
				{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(4), Phase: "Synced"},
			},
		},
		{
			name: "resourceVersion in the history",
			opts: &metainternalversion.ListOptions{ResourceVersion: rv(3), SendInitialEvents: ptr.To(false)},
			want: []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(4), Phase: "Synced"}},
		},
		{name: "resourceVersion older than the history", opts: &metainternalversion.ListOptions{ResourceVersion: rv(0)}, wantErr: apierrors.IsResourceExpired},
		{name: "resourceVersion from another process", opts: &metainternalversion.ListOptions{ResourceVersion: "7"}, wantErr: apierrors.IsResourceExpired},
		{name: "resourceVersion newer than current", opts: &metainternalversion.ListOptions{ResourceVersion: rv(5)}, wantErr: apierrors.IsResourceExpired},
		{name: "resourceVersion not a number", opts: &metainternalversion.ListOptions{ResourceVersion: "abc"}, wantErr: apierrors.IsBadRequest},
		{
			name: "watch-list: initial events and the initial-events-end bookmark",
			opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			want: []ev{added("b", rv(2), "Pending"), bookmark},
		},
		{
			name: "watch-list from an old resourceVersion still sends the current state",
			opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersion: "7"},
			want: []ev{added("b", rv(2), "Pending"), bookmark},
		},
		{
			name: "watch-list without bookmarks",
			opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true)},
			want: []ev{added("b", rv(2), "Pending")},
		},
		{
			name:    "watch-list from a resourceVersion newer than current",
			opts:    &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersion: rv(9)},
			wantErr: apierrors.IsResourceExpired,
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			// 101 add a, 102 add b, 103 modify a, 104 delete a; the
			// history holds 102..104.
			s, _ := newTestStore(WithHistorySize(3))
			s.Replace([]*dcp{obj("ns", "a", "Pending")})
			s.Replace([]*dcp{obj("ns", "a", "Pending"), obj("ns", "b", "Pending")})
			s.Replace([]*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Pending")})
			s.Replace([]*dcp{obj("ns", "b", "Pending")})

			w, err := s.Watch(context.Background(), "", nil, tc.opts, newDCP)
			if tc.wantErr != nil {
				if err == nil || !tc.wantErr(err) {
					t.Fatalf("Watch error = %v, want a different error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Stop()
			expectEvents(t, w, tc.want)

			// The watch goes on with live changes.
			s.Replace([]*dcp{obj("ns", "b", "Pending"), obj("ns", "c", "Synced")})
			expectEvents(t, w, []ev{added("c", rv(5), "Synced")})
		})
	}
}

func TestWatchListBookmarkObject(t *testing.T) {
	s, _ := newTestStore()
	s.Replace([]*dcp{obj("ns", "a", "Synced")})
	w := mustWatch(t, s, "ns", nil, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true})
	<-w.ResultChan() // Added ns/a
	e := <-w.ResultChan()
	bm, ok := e.Object.(*dcp)
	if e.Type != watch.Bookmark || !ok {
		t.Fatalf("second event is %s %T, want Bookmark *DownstreamCopy", e.Type, e.Object)
	}
	want := &dcp{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv(1), Annotations: map[string]string{"k8s.io/initial-events-end": "true"}}}
	if !reflect.DeepEqual(bm, want) {
		t.Errorf("bookmark object = %+v, want %+v", bm, want)
	}
	if _, err := s.Watch(context.Background(), "", nil, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}, nil); err == nil {
		t.Error("watch-list without a constructor for the bookmark: no error")
	}
}

func TestWatchPredicateTransitions(t *testing.T) {
	synced := func(o *dcp) bool { return o.Status.Phase == "Synced" }
	steps := []struct {
		name string
		set  []*dcp
		want []ev
	}{
		{name: "not matching", set: []*dcp{obj("ns", "a", "Pending")}},
		{name: "starts to match", set: []*dcp{obj("ns", "a", "Synced")}, want: []ev{{Type: watch.Added, Namespace: "ns", Name: "a", RV: rv(2), Phase: "Synced"}}},
		{name: "still matches", set: []*dcp{obj("ns", "a", "Synced", withMessage("m"))}, want: []ev{{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(3), Phase: "Synced"}}},
		{name: "stops matching: Deleted with the last matching state", set: []*dcp{obj("ns", "a", "Conflict")}, want: []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(4), Phase: "Synced"}}},
		{name: "changes while not matching", set: []*dcp{obj("ns", "a", "Conflict", withMessage("x"))}},
		{name: "matches again", set: []*dcp{obj("ns", "a", "Synced")}, want: []ev{{Type: watch.Added, Namespace: "ns", Name: "a", RV: rv(6), Phase: "Synced"}}},
		{name: "other namespace", set: []*dcp{obj("ns", "a", "Synced"), obj("other", "b", "Synced")}},
		{name: "deleted while matching", set: []*dcp{obj("other", "b", "Synced")}, want: []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(8), Phase: "Synced"}}},
		{name: "added not matching, deleted", set: []*dcp{obj("ns", "c", "Pending")}},
		{name: "deleted not matching", set: nil},
	}
	s, _ := newTestStore()
	w := mustWatch(t, s, "ns", synced, &metainternalversion.ListOptions{ResourceVersion: rv(0)})
	var all []ev
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			s.Replace(st.set)
			expectEvents(t, w, st.want)
		})
		all = append(all, st.want...)
	}
	t.Run("replay from the history gives the same events", func(t *testing.T) {
		replay := mustWatch(t, s, "ns", synced, &metainternalversion.ListOptions{ResourceVersion: rv(0)})
		expectEvents(t, replay, all)
	})
}

func TestWatchEventsAreDeepCopies(t *testing.T) {
	s, _ := newTestStore()
	w1 := mustWatch(t, s, "", nil, nil)
	w2 := mustWatch(t, s, "", nil, nil)
	s.Replace([]*dcp{obj("ns", "a", "Synced")})
	e1, e2 := <-w1.ResultChan(), <-w2.ResultChan()
	if e1.Object == e2.Object {
		t.Fatal("two watchers got the same object")
	}
	e1.Object.(*dcp).Status.Phase = "Mutated"
	if got, _ := s.Get("ns", "a"); got.Status.Phase != "Synced" {
		t.Errorf("stored object changed through an event: phase %s", got.Status.Phase)
	}
	if e2.Object.(*dcp).Status.Phase != "Synced" {
		t.Error("one watcher's event changed another's")
	}
}

func TestSlowWatcherIsClosed(t *testing.T) {
	s, _ := newTestStore(WithWatchBufferSize(2))
	slow := mustWatch(t, s, "", nil, nil)
	fast := mustWatch(t, s, "", nil, nil)

	var set []*dcp
	for i := 1; i <= 10; i++ {
		set = append(set, obj("ns", fmt.Sprintf("o%02d", i), "Synced"))
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Replace(set)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Replace %d blocked on a watcher that does not read", i)
		}
		select {
		case e := <-fast.ResultChan():
			if got := summarize(t, e); got.Type != watch.Added || got.RV != rv(i) {
				t.Fatalf("fast watcher got %v, want Added rv %s", got, rv(i))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("fast watcher got nothing for change %d", i)
		}
	}

	got := expectClosed(t, slow)
	want := []ev{
		{Type: watch.Added, Namespace: "ns", Name: "o01", RV: rv(1), Phase: "Synced"},
		{Type: watch.Added, Namespace: "ns", Name: "o02", RV: rv(2), Phase: "Synced"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slow watcher got %v before it was closed, want %v", got, want)
	}
	s.mu.RLock()
	n := len(s.watchers)
	s.mu.RUnlock()
	if n != 1 {
		t.Errorf("%d watchers registered, want only the fast one", n)
	}

	// Its client watches again from the last version it saw and misses nothing.
	again := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: rv(2)})
	if got := pending(t, again); len(got) != 8 || got[0].Name != "o03" || got[7].Name != "o10" {
		t.Errorf("resumed watch got %v, want o03..o10", got)
	}
}

func TestWatchStop(t *testing.T) {
	t.Run("Stop closes the result channel", func(t *testing.T) {
		s, _ := newTestStore()
		s.Replace([]*dcp{obj("ns", "a", "Synced")})
		w, err := s.Watch(context.Background(), "", nil, nil, newDCP)
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		w.Stop() // harmless
		if got := expectClosed(t, w); len(got) > 1 {
			t.Errorf("got %v after Stop, want at most the one queued event", got)
		}
		s.Replace(nil) // no send on a closed channel
	})
	t.Run("cancelling the context closes the result channel", func(t *testing.T) {
		s, _ := newTestStore()
		ctx, cancel := context.WithCancel(context.Background())
		w, err := s.Watch(ctx, "", nil, nil, newDCP)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		expectClosed(t, w)
		s.Replace([]*dcp{obj("ns", "a", "Synced")})
		w.Stop()
	})
	t.Run("no goroutine or watcher outlives its watch", func(t *testing.T) {
		s, _ := newTestStore()
		before := runtime.NumGoroutine()
		var cancels []context.CancelFunc
		var ws []watch.Interface
		for i := 0; i < 50; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			w, err := s.Watch(ctx, "", nil, nil, newDCP)
			if err != nil {
				t.Fatal(err)
			}
			cancels = append(cancels, cancel)
			ws = append(ws, w)
		}
		for i, w := range ws {
			if i%2 == 0 {
				cancels[i]()
			} else {
				w.Stop()
			}
		}
		for _, w := range ws {
			expectClosed(t, w)
		}
		for _, c := range cancels {
			c()
		}
		s.mu.RLock()
		n := len(s.watchers)
		s.mu.RUnlock()
		if n != 0 {
			t.Errorf("%d watchers still registered", n)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if after := runtime.NumGoroutine(); after > before {
			t.Errorf("%d goroutines before the watches, %d after they ended", before, after)
		}
	})
}

// TestConcurrentWatchersSeeConsistentState runs writers, readers and
// watchers at once (meant for -race) and checks that a watcher that applies
// its events ends with exactly what List returns.
func TestConcurrentWatchersSeeConsistentState(t *testing.T) {
	s, _ := newTestStore(WithWatchBufferSize(100000))
	const rounds = 200
	set := func(i int) []*dcp {
		var out []*dcp
		for j := 0; j < 10; j++ {
			if (i+j)%3 != 0 {
				out = append(out, obj(fmt.Sprint("ns", j%2), fmt.Sprint("o", j), courier.CopyPhase(fmt.Sprint("P", (i*j)%4))))
			}
		}
		return out
	}
	synced := func(o *dcp) bool { return o.Status.Phase == "P1" || o.Status.Phase == "P2" }

	type result struct {
		state map[string]string
		err   error
	}
	var wg sync.WaitGroup
	results := make(chan result, 8)
	stop := make(chan struct{})
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			ns, match := "", func(*dcp) bool { return true }
			if k%2 == 1 {
				ns, match = "ns1", synced
			}
			opts := &metainternalversion.ListOptions{}
			if k >= 4 {
				opts = &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}
			}
			w, err := s.Watch(context.Background(), ns, match, opts, newDCP)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer w.Stop()
			state := map[string]string{}
			for {
				select {
				case e := <-w.ResultChan():
					if e.Type == watch.Bookmark {
						continue
					}
					o := e.Object.(*dcp)
					switch e.Type {
					case watch.Added, watch.Modified:
						state[o.Namespace+"/"+o.Name] = o.ResourceVersion + " " + string(o.Status.Phase)
					case watch.Deleted:
						delete(state, o.Namespace+"/"+o.Name)
					}
				case <-stop:
					// Everything written is queued by now; take the rest.
					for {
						select {
						case e := <-w.ResultChan():
							o := e.Object.(*dcp)
							switch e.Type {
							case watch.Added, watch.Modified:
								state[o.Namespace+"/"+o.Name] = o.ResourceVersion + " " + string(o.Status.Phase)
							case watch.Deleted:
								delete(state, o.Namespace+"/"+o.Name)
							}
						default:
							items, _ := s.List(ns, match)
							want := map[string]string{}
							for _, it := range items {
								want[it.Namespace+"/"+it.Name] = it.ResourceVersion + " " + string(it.Status.Phase)
							}
							if !reflect.DeepEqual(state, want) {
								results <- result{err: fmt.Errorf("watcher %d ended with %v, list says %v", k, state, want)}
								return
							}
							results <- result{state: state}
							return
						}
					}
				}
			}
		}(k)
	}
	var writers sync.WaitGroup
	for g := 0; g < 3; g++ {
		writers.Add(1)
		go func(g int) {
			defer writers.Done()
			for i := 0; i < rounds; i++ {
				s.Replace(set(i*3 + g))
				s.List("ns0", nil)
				s.Get("ns1", "o1")
			}
		}(g)
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Error(r.err)
		}
	}
}

// TestWatchSharedEventsPointAtTheStore: a shared watcher is handed the
// stored objects themselves, beside a watcher that gets copies; a Deleted
// event, whose resource version is the deletion's, is a copy either way.
func TestWatchSharedEventsPointAtTheStore(t *testing.T) {
	s, _ := newTestStore()
	shared, err := s.WatchShared(context.Background(), "", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Stop()
	copied := mustWatch(t, s, "", nil, nil)
	s.Replace([]*dcp{obj("ns", "a", "Synced")})
	stored, _ := s.Peek("ns", "a")
	if e := <-shared.ResultChan(); e.Type != watch.Added || e.Object != stored {
		t.Errorf("shared watcher: %s of %p, want Added of the stored object %p", e.Type, e.Object, stored)
	}
	if e := <-copied.ResultChan(); e.Object == stored {
		t.Error("a watcher that was not shared got the stored object")
	}
	s.Delete(Key{Namespace: "ns", Name: "a"})
	e := <-shared.ResultChan()
	if e.Type != watch.Deleted || e.Object == stored {
		t.Fatalf("shared watcher: %s of %p, want Deleted of a copy of %p", e.Type, e.Object, stored)
	}
	if got, want := e.Object.(*dcp).ResourceVersion, rv(2); got != want {
		t.Errorf("Deleted event at resource version %s, want the deletion's %s", got, want)
	}
	if stored.ResourceVersion != rv(1) {
		t.Errorf("the stored object's resource version changed to %s", stored.ResourceVersion)
	}
}

// TestWithEventCopy: watchers' events hold what the store's event copy
// makes, a Deleted one with the deletion's resource version, and the
// stored objects stay as they were.
func TestWithEventCopy(t *testing.T) {
	copies := 0
	s, _ := newTestStore(WithEventCopy(func(o *dcp) *dcp {
		copies++
		c := *o
		return &c
	}))
	w := mustWatch(t, s, "", nil, nil)
	s.Replace([]*dcp{obj("ns", "a", "Synced", func(o *dcp) { o.Labels = map[string]string{"k": "v"} })})
	stored, _ := s.Peek("ns", "a")
	e := <-w.ResultChan()
	got := e.Object.(*dcp)
	if got == stored || copies != 1 {
		t.Fatalf("event object %p (stored %p), %d copies made; want the event copy", got, stored, copies)
	}
	got.Labels["k"] = "shared" // the shallow copy shares the map: it is what this copy does
	if stored.Labels["k"] != "shared" {
		t.Fatal("the event does not hold the store's event copy")
	}
	s.Delete(Key{Namespace: "ns", Name: "a"})
	e = <-w.ResultChan()
	if e.Type != watch.Deleted || e.Object.(*dcp).ResourceVersion != rv(2) || stored.ResourceVersion != rv(1) {
		t.Errorf("Deleted event at %s, stored object at %s; want %s and %s", e.Object.(*dcp).ResourceVersion, stored.ResourceVersion, rv(2), rv(1))
	}
}
