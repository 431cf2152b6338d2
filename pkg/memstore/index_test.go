package memstore

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

var byCluster = WithWatchIndex("spec.cluster", func(o *dcp) string { return o.Spec.Cluster })

func onCluster(c string) func(*dcp) { return func(o *dcp) { o.Spec.Cluster = c } }

// clusterWatchers starts n watchers, the i-th pinned to Cluster c<i> (as
// the REST layer files a watch whose selector requires spec.cluster=c<i>),
// each counting how often its selector is evaluated.
func clusterWatchers(t testing.TB, s *Store[*dcp], n int, indexed bool) ([]watch.Interface, *atomic.Int64) {
	t.Helper()
	var evaluated atomic.Int64
	ws := make([]watch.Interface, n)
	for i := range n {
		c := fmt.Sprintf("c%d", i)
		match := func(o *dcp) bool { evaluated.Add(1); return o.Spec.Cluster == c }
		opts := &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false)}
		var err error
		if indexed {
			ws[i], err = s.WatchIndexed(context.Background(), "ns", c, match, opts, newDCP)
		} else {
			ws[i], err = s.Watch(context.Background(), "ns", match, opts, newDCP)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ws[i].Stop)
	}
	return ws, &evaluated
}

// waitingIn returns what waits in w's channel, without waiting.
func waitingIn(w watch.Interface) []string {
	var out []string
	for {
		select {
		case e := <-w.ResultChan():
			o := e.Object.(*dcp)
			out = append(out, fmt.Sprintf("%s %s %s", e.Type, o.Name, o.Spec.Cluster))
		default:
			return out
		}
	}
}

// TestIndexedWatchersSeeOnlyTheirValue: 500 agents' watches, one per
// Cluster; a change of one Cluster's row reaches that Cluster's watcher
// alone, and no other watcher's selector is even evaluated. The positive
// control is the matching watcher, which does get each event.
func TestIndexedWatchersSeeOnlyTheirValue(t *testing.T) {
	s, _ := newTestStore(byCluster)
	ws, evaluated := clusterWatchers(t, s, 500, true)

	s.Upsert(obj("ns", "app.c7.secret.a", courier.CopyPhasePending, onCluster("c7")))
	s.Upsert(obj("ns", "app.c7.secret.a", courier.CopyPhaseSynced, onCluster("c7")))
	for i, w := range ws {
		got := waitingIn(w)
		switch {
		case i == 7 && fmt.Sprint(got) != "[ADDED app.c7.secret.a c7 MODIFIED app.c7.secret.a c7]":
			t.Errorf("c7's watcher got %v", got)
		case i != 7 && len(got) != 0:
			t.Errorf("c%d's watcher got %v", i, got)
		}
	}
	// Added: the new state; Modified: the new and the old state.
	if n := evaluated.Load(); n != 3 {
		t.Errorf("selectors evaluated %d times for two events, want 3 (c7's only)", n)
	}

	// A row that moves from one value to another leaves one watcher and
	// joins the other.
	s.Upsert(obj("ns", "app.c7.secret.a", courier.CopyPhaseSynced, onCluster("c8")))
	if got := fmt.Sprint(waitingIn(ws[7]), waitingIn(ws[8])); got != "[DELETED app.c7.secret.a c7] [ADDED app.c7.secret.a c8]" {
		t.Errorf("moved row: %s", got)
	}
	s.Delete(Key{Namespace: "ns", Name: "app.c7.secret.a"})
	if got := fmt.Sprint(waitingIn(ws[7]), waitingIn(ws[8])); got != "[] [DELETED app.c7.secret.a c8]" {
		t.Errorf("deleted row: %s", got)
	}

	// A stopped watcher leaves the index.
	ws[9].Stop()
	s.mu.Lock()
	_, filed := s.indexed["c9"]
	left := len(s.indexed)
	s.mu.Unlock()
	if filed || left != 499 {
		t.Errorf("after Stop: c9 still filed %v, %d values indexed", filed, left)
	}
}

// TestIndexedWatchersWithoutSelector: a watcher whose selector pins the
// index field and nothing else is filed with no match of its own (the
// REST layer's onlyPins); the index value alone decides what it sees,
// also for a row that moves between values, and a neighbour with a
// selector of its own still evaluates it.
func TestIndexedWatchersWithoutSelector(t *testing.T) {
	s, _ := newTestStore(byCluster)
	opts := &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false)}
	var ws []watch.Interface
	for _, c := range []string{"c7", "c8"} {
		w, err := s.WatchIndexed(context.Background(), "ns", c, nil, opts, newDCP)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		ws = append(ws, w)
	}
	var evaluated atomic.Int64
	synced := func(o *dcp) bool { evaluated.Add(1); return o.Status.Phase == courier.CopyPhaseSynced }
	onlySynced, err := s.WatchIndexed(context.Background(), "ns", "c7", synced, opts, newDCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(onlySynced.Stop)

	s.Upsert(obj("ns", "app.c7.secret.a", courier.CopyPhasePending, onCluster("c7")))
	s.Upsert(obj("ns", "app.c9.secret.a", courier.CopyPhasePending, onCluster("c9")))
	s.Upsert(obj("ns", "app.c7.secret.a", courier.CopyPhaseSynced, onCluster("c7")))
	s.Upsert(obj("other", "app.c7.secret.a", courier.CopyPhaseSynced, onCluster("c7")))
	if got := fmt.Sprint(waitingIn(ws[0]), waitingIn(ws[1])); got != "[ADDED app.c7.secret.a c7 MODIFIED app.c7.secret.a c7] []" {
		t.Errorf("c7 and c8: %s", got)
	}
	if got := fmt.Sprint(waitingIn(onlySynced)); got != "[ADDED app.c7.secret.a c7]" {
		t.Errorf("c7's watcher of Synced rows got %s", got)
	}
	if evaluated.Load() == 0 {
		t.Error("the neighbour's own selector was never evaluated")
	}

	s.Upsert(obj("ns", "app.c7.secret.a", courier.CopyPhaseSynced, onCluster("c8")))
	if got := fmt.Sprint(waitingIn(ws[0]), waitingIn(ws[1])); got != "[DELETED app.c7.secret.a c7] [ADDED app.c7.secret.a c8]" {
		t.Errorf("moved row: %s", got)
	}

	// Without an index, a watch with no selector would see everything:
	// refused rather than widened.
	plain, _ := newTestStore()
	if _, err := plain.WatchIndexed(context.Background(), "ns", "c7", nil, opts, newDCP); err == nil {
		t.Error("an indexed watch without a selector on a store without an index was accepted")
	}
}

// TestUnindexedWatchersStillSeeEverything: a watcher that pins nothing
// (a user's kubectl get -w) is handed every event beside indexed ones,
// and a store without an index treats WatchIndexed as Watch.
func TestUnindexedWatchersStillSeeEverything(t *testing.T) {
	s, _ := newTestStore(byCluster)
	ws, _ := clusterWatchers(t, s, 3, true)
	all, err := s.Watch(context.Background(), "", nil, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false)}, newDCP)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	s.Upsert(obj("ns", "a", courier.CopyPhasePending, onCluster("c1")), obj("ns", "b", courier.CopyPhasePending, onCluster("c2")))
	if got := fmt.Sprint(waitingIn(all), waitingIn(ws[1]), waitingIn(ws[2]), waitingIn(ws[0])); got != "[ADDED a c1 ADDED b c2] [ADDED a c1] [ADDED b c2] []" {
		t.Errorf("got %s", got)
	}

	plain, _ := newTestStore()
	if plain.WatchIndexField() != "" {
		t.Errorf("a store without an index has index field %q", plain.WatchIndexField())
	}
	pw, _ := clusterWatchers(t, plain, 2, true)
	plain.Upsert(obj("ns", "a", courier.CopyPhasePending, onCluster("c1")))
	if got := fmt.Sprint(waitingIn(pw[0]), waitingIn(pw[1])); got != "[] [ADDED a c1]" {
		t.Errorf("without an index: %s", got)
	}
}

// BenchmarkChangeWith500ClusterWatchers is one row change with 500
// agents' watches, indexed (as served) and not: the cost per change of
// the unindexed store grows with the watchers, the indexed one's not.
func BenchmarkChangeWith500ClusterWatchers(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		b.Run(fmt.Sprintf("indexed=%v", indexed), func(b *testing.B) {
			s, _ := newTestStore(byCluster)
			ws, evaluated := clusterWatchers(b, s, 500, indexed)
			phases := []courier.CopyPhase{courier.CopyPhasePending, courier.CopyPhaseSynced}
			evaluated.Store(0)
			i := 0
			for b.Loop() {
				s.Upsert(obj("ns", "app.c7.secret.a", phases[i%2], onCluster("c7")))
				<-ws[7].ResultChan()
				i++
			}
			b.ReportMetric(float64(evaluated.Load())/float64(i), "selectors/change")
		})
	}
}

// TestIndexedWatchListLooksOnlyAtItsValue: an agent's watch-list (and a
// watch from resourceVersion "") is handed its Cluster's rows, in key
// order, with the bookmark, after evaluating its selector on those rows
// alone -- not on every row, which made N agents connecting cost N² -- and
// the objects' index follows rows that move to another Cluster or go.
// The positive control is an unindexed watch-list, which evaluates every
// row and gets the same rows.
func TestIndexedWatchListLooksOnlyAtItsValue(t *testing.T) {
	s, _ := newTestStore(byCluster)
	for i := range 300 {
		s.Upsert(obj("ns", fmt.Sprintf("r%03d", i), courier.CopyPhasePending, onCluster(fmt.Sprintf("c%d", i%100))))
	}
	s.Upsert(obj("ns", "r005", courier.CopyPhasePending, onCluster("c7")))    // moved from c5
	s.Delete(Key{Namespace: "ns", Name: "r107"})                              // gone from c7
	s.Upsert(obj("ns", "r207", courier.CopyPhaseSynced, onCluster("c7")))     // changed, stays
	s.Upsert(obj("other", "r999", courier.CopyPhasePending, onCluster("c7"))) // another namespace
	list := func(indexed bool) (string, int64) {
		var evaluated atomic.Int64
		match := func(o *dcp) bool { evaluated.Add(1); return o.Spec.Cluster == "c7" }
		opts := &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}
		var w watch.Interface
		var err error
		if indexed {
			w, err = s.WatchIndexed(context.Background(), "ns", "c7", match, opts, newDCP)
		} else {
			w, err = s.Watch(context.Background(), "ns", match, opts, newDCP)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var got []string
		for e := range w.ResultChan() {
			if e.Type == watch.Bookmark {
				break
			}
			got = append(got, fmt.Sprintf("%s %s", e.Type, e.Object.(*dcp).Name))
		}
		return fmt.Sprint(got), evaluated.Load()
	}
	want := "[ADDED r005 ADDED r007 ADDED r207]"
	got, evaluated := list(true)
	// r999 is c7's too, in another namespace: the namespace leaves it out
	// before the selector is asked.
	if got != want || evaluated != 3 {
		t.Errorf("indexed watch-list: %s after %d evaluations, want %s after 3", got, evaluated, want)
	}
	got, evaluated = list(false)
	if got != want || evaluated != 299 {
		t.Errorf("unindexed watch-list: %s after %d evaluations, want %s after 299 (every row in ns)", got, evaluated, want)
	}
	s.Delete(Key{Namespace: "ns", Name: "r005"}, Key{Namespace: "ns", Name: "r007"}, Key{Namespace: "ns", Name: "r207"}, Key{Namespace: "other", Name: "r999"})
	s.mu.Lock()
	_, left := s.objIndex["c7"]
	s.mu.Unlock()
	if left {
		t.Error("c7 still in the objects' index after its last row went")
	}
}

// TestIdleWatchersHoldNoGoroutine: 1,000 agents' idle watches hold no
// goroutine each; a burst larger than a watcher's channel starts one,
// which hands over every event in order and ends once the queue is empty;
// a cancelled context and Stop still close the channel. The positive
// control is the burst: its goroutine shows while the events wait.
func TestIdleWatchersHoldNoGoroutine(t *testing.T) {
	s, _ := newTestStore(byCluster)
	ws, _ := clusterWatchers(t, s, 1000, true)
	if n := watcherRuns(); n > 50 {
		t.Errorf("1,000 idle watchers run %d goroutines", n)
	}
	for i := range 3 * directEvents {
		s.Upsert(obj("ns", fmt.Sprintf("r%02d", i), courier.CopyPhasePending, onCluster("c3")))
	}
	// The positive control: the count sees a watcher's goroutine while
	// events wait (more than its channel holds, so it cannot have ended).
	if n := watcherRuns(); n < 1 {
		t.Errorf("no goroutine moves c3's %d waiting events", 3*directEvents)
	}
	for i := range 3 * directEvents {
		e := <-ws[3].ResultChan()
		if name := e.Object.(*dcp).Name; name != fmt.Sprintf("r%02d", i) {
			t.Fatalf("event %d is %s", i, name)
		}
	}
	if !waitUntil(func() bool { return watcherRuns() == 0 }) {
		t.Errorf("%d watcher goroutines left after the queue emptied", watcherRuns())
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.WatchIndexed(ctx, "ns", "c3", nil, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false)}, newDCP)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	ws[4].Stop()
	for _, w := range []watch.Interface{w, ws[4]} {
		select {
		case _, open := <-w.ResultChan():
			if open {
				t.Error("an event after the end")
			}
		case <-time.After(5 * time.Second):
			t.Error("channel not closed after cancel or Stop")
		}
	}
}

// watcherRuns counts the goroutines watchers started, from every
// goroutine's stack: runtime.NumGoroutine would count the test process's
// other goroutines too, which come and go on their own.
func watcherRuns() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			runs := 0
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				// Every goroutine a watcher starts, scheduled yet or not.
				if strings.HasPrefix(line, "created by ") && strings.Contains(line, "memstore.(*watcher[") {
					runs++
				}
			}
			return runs
		}
		buf = make([]byte, 2*len(buf))
	}
}

func waitUntil(cond func() bool) bool {
	for range 500 {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// Watchers counts every watch, indexed or not, while it runs.
func TestWatchersCountsEveryWatch(t *testing.T) {
	s, _ := newTestStore(byCluster)
	if n := s.Watchers(); n != 0 {
		t.Fatalf("%d watchers before any watch, want 0", n)
	}
	plain, err := s.Watch(context.Background(), "", nil, nil, newDCP)
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := s.WatchIndexed(context.Background(), "", "c1", nil, nil, newDCP)
	if err != nil {
		t.Fatal(err)
	}
	if n, in := s.Watchers(), s.IndexedWatchers("c1"); n != 2 || in != 1 {
		t.Fatalf("Watchers %d (indexed under c1: %d), want 2 (1)", n, in)
	}
	plain.Stop()
	indexed.Stop()
	expectClosed(t, plain)
	expectClosed(t, indexed)
	if n := s.Watchers(); n != 0 {
		t.Errorf("%d watchers after both stopped, want 0", n)
	}
}
