package memstore

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// busy keeps every P busy until the returned function is called, so that
// writers, the watchers' goroutines and the test's reader compete for CPU.
func busy(t *testing.T) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < runtime.GOMAXPROCS(0); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				for j := 0; j < 10000; j++ {
					n += j
				}
			}
		}()
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// TestWatchSurvivesBurst changes every one of 10,000 rows in one Upsert,
// then deletes half and adds them back, while watchers read slowly and all
// CPUs are busy: every watcher gets every event it should, once and in
// order, and none is closed.
func TestWatchSurvivesBurst(t *testing.T) {
	const n = 10000
	even := func(o *dcp) bool { i, _ := strconv.Atoi(o.Name[3:]); return i%2 == 0 }
	tcs := []struct {
		name    string
		match   func(*dcp) bool
		opts    func(current string) *metainternalversion.ListOptions
		initial int // Added events (and a bookmark) before the burst
	}{
		{name: "from the current version", opts: func(cur string) *metainternalversion.ListOptions {
			return &metainternalversion.ListOptions{ResourceVersion: cur}
		}},
		{name: "watch-list: 10,000 initial events, then the burst", initial: n, opts: func(string) *metainternalversion.ListOptions {
			return &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}
		}},
		{name: "half the rows by selector", match: even, opts: func(cur string) *metainternalversion.ListOptions {
			return &metainternalversion.ListOptions{ResourceVersion: cur}
		}},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore()
			s.Upsert(rows(n)...)
			_, cur := s.List("", nil)
			w := mustWatch(t, s, "", tc.match, tc.opts(cur))
			stopBusy := busy(t)

			// The reader takes a break every 500 events.
			type seen struct {
				typ  watch.EventType
				name string
				rv   uint64
			}
			got := make(chan []seen, 1)
			closed := make(chan struct{})
			wantTotal := tc.initial + 2*n
			if tc.initial > 0 {
				wantTotal++ // the bookmark
			}
			if tc.match != nil {
				wantTotal = n / 2
			}
			go func() {
				var all []seen
				for e := range w.ResultChan() {
					o := e.Object.(*dcp)
					v, _ := strconv.ParseUint(o.ResourceVersion, 10, 64)
					all = append(all, seen{typ: e.Type, name: o.Name, rv: v})
					if len(all)%500 == 0 {
						time.Sleep(time.Millisecond)
					}
					if len(all) == wantTotal {
						got <- all
					}
				}
				close(closed)
			}()

			var deleted []Key
			var readded []*dcp
			for i, o := range rows(n) {
				if i%2 == 1 {
					deleted = append(deleted, KeyOf(o))
					readded = append(readded, o)
				}
			}
			if c := s.Upsert(rows(n, withMessage("burst"))...); c != n {
				t.Fatalf("Upsert changed %d rows, want %d", c, n)
			}
			s.Delete(deleted...)
			s.Upsert(readded...)
			_, end := s.List("", nil)

			var all []seen
			select {
			case all = <-got:
			case <-closed:
				t.Fatal("the watch was closed")
			case <-time.After(60 * time.Second):
				t.Fatal("not every event arrived within a minute")
			}
			stopBusy()

			// Nothing more comes, and the watch stays open.
			select {
			case <-closed:
				t.Fatal("the watch was closed after the burst")
			case <-time.After(100 * time.Millisecond):
			}
			start, _ := strconv.ParseUint(cur, 10, 64)
			last, _ := strconv.ParseUint(end, 10, 64)
			i := 0
			if tc.initial > 0 {
				for ; i < tc.initial; i++ {
					if all[i].typ != watch.Added || all[i].rv > start {
						t.Fatalf("initial event %d: %+v", i, all[i])
					}
				}
				if all[i].typ != watch.Bookmark || all[i].rv != start {
					t.Fatalf("after the initial events: %+v, want the bookmark at %d", all[i], start)
				}
				i++
			}
			prev := start
			counts := map[watch.EventType]int{}
			for _, e := range all[i:] {
				if e.rv <= prev || e.rv > last {
					t.Fatalf("event %+v after resourceVersion %d (last %d): out of order or repeated", e, prev, last)
				}
				if tc.match == nil && e.rv != prev+1 {
					t.Fatalf("event %+v after resourceVersion %d: one is missing", e, prev)
				}
				prev = e.rv
				counts[e.typ]++
			}
			want := map[watch.EventType]int{watch.Modified: n, watch.Deleted: n / 2, watch.Added: n / 2}
			if tc.match != nil {
				// The odd rows are the ones deleted and added again.
				want = map[watch.EventType]int{watch.Modified: n / 2}
			}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				t.Errorf("events after the initial ones: %v, want %v", counts, want)
			}
		})
	}
}

// TestSlowWatcherIsClosedAtTheScaledLimit: without a fixed buffer size, a
// watcher is closed when more events wait for it than twice the peak number
// of objects plus 1,024, after it has been sent everything that waited.
func TestSlowWatcherIsClosedAtTheScaledLimit(t *testing.T) {
	const n = 100
	limit := max(DefaultWatchBufferSize, 2*n+burstSlack) // 1,224
	s, _ := newTestStore()
	s.Upsert(rows(n)...)
	_, cur := s.List("", nil)
	slow := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: cur})
	fast := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: cur})
	// The reading watcher reports each round it has read, and the writer
	// waits for that before the next round: on a busy machine its goroutine
	// may otherwise not run until all 1,300 events wait for it, past the
	// limit, and it would be closed as too slow as well.
	roundRead := make(chan struct{})
	go func() {
		count := 0
		for range fast.ResultChan() {
			count++
			if count%n == 0 {
				roundRead <- struct{}{}
			}
		}
	}()

	for round := 0; round < 13; round++ {
		s.Upsert(rows(n, withMessage(fmt.Sprint(round)))...)
		select {
		case <-roundRead:
		case <-time.After(30 * time.Second):
			t.Fatalf("the reading watcher did not get round %d's %d events", round, n)
		}
	}
	got := expectClosed(t, slow)
	if len(got) != limit {
		t.Fatalf("the slow watcher got %d events before it was closed, want %d", len(got), limit)
	}
	for i, e := range got {
		if want := rv(n + 1 + i); e.RV != want || e.Type != watch.Modified {
			t.Fatalf("event %d: %v, want Modified at %s", i, e, want)
		}
	}
	s.mu.RLock()
	watchers := len(s.watchers)
	s.mu.RUnlock()
	if watchers != 1 {
		t.Errorf("%d watchers registered, want the fast one", watchers)
	}

	// Its client resumes from the last version it saw; the history has it.
	again := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: got[len(got)-1].RV})
	if rest := expectCount(t, again, 13*n-limit); rest[0].RV != rv(n+limit+1) {
		t.Errorf("resumed watch starts at %v, want resourceVersion %s", rest[0], rv(n+limit+1))
	}
}

// TestStopWithManyEventsWaiting: Stop drops what waits and ends the watch.
func TestStopWithManyEventsWaiting(t *testing.T) {
	s, _ := newTestStore()
	s.Upsert(rows(2000)...)
	before := runtime.NumGoroutine()
	w, err := s.Watch(t.Context(), "", nil, nil, newDCP) // 2,000 initial events
	if err != nil {
		t.Fatal(err)
	}
	s.Upsert(rows(2000, withMessage("x"))...)
	<-w.ResultChan()
	w.Stop()
	if got := expectClosed(t, w); len(got) > 4000 {
		t.Errorf("got %d events after Stop", len(got))
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines before the watch, %d after it ended", before, after)
	}
}

// expectCount reads n events from w, failing after a few seconds.
func expectCount(t *testing.T, w watch.Interface, n int) []ev {
	t.Helper()
	var got []ev
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("closed after %d of %d events", len(got), n)
			}
			got = append(got, summarize(t, e))
		case <-timeout:
			t.Fatalf("got %d of %d events", len(got), n)
		}
	}
	return got
}

// TestHistoryCoversBurst: without a fixed history size, a watch resumes from
// before a burst that changed every object, and from before the deletion of
// them all.
func TestHistoryCoversBurst(t *testing.T) {
	const n = 3000 // more than DefaultHistorySize
	s, _ := newTestStore()
	s.Upsert(rows(n)...)
	_, before := s.List("", nil)
	s.Upsert(rows(n, withMessage("burst"))...)
	var all []Key
	for _, o := range rows(n) {
		all = append(all, KeyOf(o))
	}
	s.Delete(all...)

	w := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: before})
	got := expectCount(t, w, 2*n)
	if got[0].Type != watch.Modified || got[n].Type != watch.Deleted || got[2*n-1].RV != rv(3*n) {
		t.Errorf("resumed watch: first %v, %d-th %v, last %v", got[0], n, got[n], got[2*n-1])
	}
	// The history is bounded all the same: the first additions are gone.
	if _, err := s.Watch(t.Context(), "", nil, &metainternalversion.ListOptions{ResourceVersion: rv(1)}, newDCP); !apierrors.IsResourceExpired(err) {
		t.Errorf("watch from %s: error %v, want 410 Gone", rv(1), err)
	}
}
