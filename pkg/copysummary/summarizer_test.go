package copysummary

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

func dcRow(owner courier.CopyOwner, cluster, srcRV string, phase courier.CopyPhase, syncedRV string) *courier.DownstreamCopy {
	prefix := owner.Name
	if owner.Kind == courier.OwnerKindBundle {
		prefix = "b-" + owner.Name
	}
	return &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: prefix + "." + cluster + ".secret.s"},
		Spec: courier.DownstreamCopySpec{Owner: owner, HelmOp: owner.Name, Cluster: cluster,
			Source: courier.CopySource{Kind: "Secret", Name: "s", ResourceVersion: srcRV}},
		Status: courier.DownstreamCopyStatus{Phase: phase, SyncedResourceVersion: syncedRV},
	}
}

// start runs a Summarizer over rows until the test ends, as if someone
// watched its summaries (demand_test.go has the tests of nobody watching).
func start(t *testing.T, rows *memstore.Store[*courier.DownstreamCopy], window time.Duration) (*Summarizer, *memstore.Store[*courier.DownstreamCopySummary]) {
	t.Helper()
	return run(t, rows, Options{Window: window, Watched: func() bool { return true }})
}

// run runs a Summarizer over rows with o until the test ends.
func run(t *testing.T, rows *memstore.Store[*courier.DownstreamCopy], o Options) (*Summarizer, *memstore.Store[*courier.DownstreamCopySummary]) {
	t.Helper()
	out := memstore.New[*courier.DownstreamCopySummary]()
	s := New(rows, out, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, out
}

// waitSummary waits until the summary ns/name satisfies cond (nil: absent).
func waitSummary(t *testing.T, out *memstore.Store[*courier.DownstreamCopySummary], name string, cond func(*courier.DownstreamCopySummary) bool) {
	t.Helper()
	var last *courier.DownstreamCopySummary
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var ok bool
		last, ok = out.Get("ws", name)
		if !ok {
			last = nil
		}
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("summary %s: condition not met; last %+v", name, last)
	}
}

func readyIs(want metav1.ConditionStatus, copies int32) func(*courier.DownstreamCopySummary) bool {
	return func(s *courier.DownstreamCopySummary) bool {
		return s != nil && s.Status.Copies == copies && len(s.Status.Conditions) == 1 && s.Status.Conditions[0].Status == want
	}
}

func TestSummarizerFollowsRows(t *testing.T) {
	rows := memstore.New[*courier.DownstreamCopy]()
	bundle := courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: "app"}
	rows.Upsert(dcRow(helmOpApp, "a", "5", courier.CopyPhaseSynced, "5"), dcRow(bundle, "a", "5", courier.CopyPhasePending, ""))
	s, out := start(t, rows, 20*time.Millisecond)

	waitSummary(t, out, "app", readyIs(metav1.ConditionTrue, 1))
	waitSummary(t, out, "bundle:app", readyIs(metav1.ConditionFalse, 1))
	if !s.HasSynced() {
		t.Error("not synced after the first summaries")
	}
	before := s.recomputed.Load()
	rows.Upsert(dcRow(bundle, "a", "5", courier.CopyPhaseSynced, "5"))
	waitSummary(t, out, "bundle:app", readyIs(metav1.ConditionTrue, 1))
	time.Sleep(60 * time.Millisecond)
	if n := s.recomputed.Load() - before; n != 1 {
		t.Errorf("a row change of one owner recomputed %d owners, want 1", n)
	}
	got, _ := out.Get("ws", "app")
	if got.Status.Conditions[0].LastTransitionTime.IsZero() {
		t.Error("Ready has no lastTransitionTime")
	}

	rows.Delete(memstore.KeyOf(dcRow(bundle, "a", "", "", "")))
	waitSummary(t, out, "bundle:app", func(s *courier.DownstreamCopySummary) bool { return s == nil })
	if _, ok := out.Get("ws", "app"); !ok {
		t.Error("the HelmOp's summary went with the Bundle's")
	}
}

// TestSummarizerRelists cuts the Summarizer's watch off (a one-event buffer
// and history) while rows come and go: it lists again and converges.
func TestSummarizerRelists(t *testing.T) {
	rows := memstore.New[*courier.DownstreamCopy](memstore.WithWatchBufferSize(1), memstore.WithHistorySize(1))
	rows.Upsert(dcRow(helmOpApp, "gone", "1", courier.CopyPhaseSynced, "1"))
	s, out := start(t, rows, 10*time.Millisecond)
	waitSummary(t, out, "app", readyIs(metav1.ConditionTrue, 1))
	var pending, synced []*courier.DownstreamCopy
	for i := 0; i < 200; i++ {
		pending = append(pending, dcRow(helmOpApp, fmt.Sprint("c", i), "2", courier.CopyPhasePending, ""))
		synced = append(synced, dcRow(helmOpApp, fmt.Sprint("c", i), "2", courier.CopyPhaseSynced, "2"))
	}
	rows.Upsert(pending...)
	rows.Delete(memstore.KeyOf(dcRow(helmOpApp, "gone", "", "", "")))
	rows.Upsert(synced...)
	waitSummary(t, out, "app", func(s *courier.DownstreamCopySummary) bool {
		return readyIs(metav1.ConditionTrue, 200)(s) && s.Status.Clusters == 200
	})
	if s.relists.Load() == 0 {
		t.Error("the watch was never cut off: the test tests nothing")
	}
}

// TestSummaryEventBound: 1,000 rows of one owner change at once (one
// Upsert, as the view hands a source's new version to every row naming it;
// then one at a time, as the engine reports Cluster after Cluster). A
// watcher of the summary sees at most 1 + ceil(D/window) events for a burst
// that took D to apply, and the last one is the final state.
func TestSummaryEventBound(t *testing.T) {
	const n = 1000
	window := DefaultWindow
	rows := memstore.New[*courier.DownstreamCopy]()
	batch := func(srcRV string, phase courier.CopyPhase, syncedRV string) []*courier.DownstreamCopy {
		var out []*courier.DownstreamCopy
		for i := 0; i < n; i++ {
			out = append(out, dcRow(helmOpApp, fmt.Sprintf("c%04d", i), srcRV, phase, syncedRV))
		}
		return out
	}
	rows.Upsert(batch("5", courier.CopyPhaseSynced, "5")...)
	_, out := start(t, rows, window)
	waitSummary(t, out, "app", readyIs(metav1.ConditionTrue, n))

	for _, tc := range []struct {
		name   string
		wantRV string
		apply  func()
	}{
		{"one upsert of 1,000 rows", "6", func() { rows.Upsert(batch("6", courier.CopyPhaseSynced, "6")...) }},
		{"1,000 upserts in a row", "7", func() {
			for _, r := range batch("7", courier.CopyPhaseSynced, "7") {
				rows.Upsert(r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := out.Watch(context.Background(), "ws", nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			drain(w, 1) // the summary as it is now
			began := time.Now()
			tc.apply()
			applied := time.Since(began)
			events, last, span := drainQuiet(w, 4*window, began)
			// Flushes are at least a window apart: k events span at
			// least (k-1) windows.
			bound := 1 + int(math.Ceil(float64(span)/float64(window)))
			t.Logf("%d summary events for %d row changes applied in %s, the last %s after the first change (bound %d)", events, n, applied, span, bound)
			if events == 0 || events > bound || events > 3 {
				t.Errorf("%d summary events, want 1..min(3, %d)", events, bound)
			}
			if last == nil || last.Status.SyncedCopies != n || last.Status.Conditions[0].Status != metav1.ConditionTrue ||
				last.Status.Sources[0].ResourceVersion != tc.wantRV {
				t.Errorf("last event: %+v", last)
			}
		})
	}
}

func drain(w watch.Interface, n int) {
	for i := 0; i < n; i++ {
		<-w.ResultChan()
	}
}

// drainQuiet counts w's events until none came for quiet, and returns the
// last summary seen and when it came, after began.
func drainQuiet(w watch.Interface, quiet time.Duration, began time.Time) (int, *courier.DownstreamCopySummary, time.Duration) {
	events := 0
	var last *courier.DownstreamCopySummary
	var span time.Duration
	for {
		select {
		case ev := <-w.ResultChan():
			events++
			span = time.Since(began)
			last, _ = ev.Object.(*courier.DownstreamCopySummary)
		case <-time.After(quiet):
			return events, last, span
		}
	}
}

// TestSummaryNeverShowsPartOfAnUpsert: one Upsert makes row a Synced and
// adds row b, Pending. No state of the rows is Ready, but the first half of
// that Upsert alone would be: a summary must never show it, however often
// it flushes.
func TestSummaryNeverShowsPartOfAnUpsert(t *testing.T) {
	rows := memstore.New[*courier.DownstreamCopy]()
	a := func(p courier.CopyPhase, synced string) *courier.DownstreamCopy {
		return dcRow(helmOpApp, "a", "5", p, synced)
	}
	rows.Upsert(a(courier.CopyPhasePending, ""))
	_, out := start(t, rows, time.Millisecond)
	waitSummary(t, out, "app", readyIs(metav1.ConditionFalse, 1))
	w, err := out.Watch(context.Background(), "ws", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const rounds = 1000
	for i := 0; i < rounds; i++ {
		b := dcRow(helmOpApp, fmt.Sprint("b", i), "5", courier.CopyPhasePending, "")
		rows.Upsert(a(courier.CopyPhaseSynced, "5"), b)
		time.Sleep(time.Millisecond)
		rows.Upsert(a(courier.CopyPhasePending, ""))
		rows.Delete(memstore.KeyOf(b))
	}
	events, ready := 0, 0
	for {
		select {
		case ev := <-w.ResultChan():
			events++
			if s, ok := ev.Object.(*courier.DownstreamCopySummary); ok && s.Status.Conditions[0].Status == metav1.ConditionTrue {
				ready++
			}
			continue
		case <-time.After(100 * time.Millisecond):
		}
		break
	}
	t.Logf("%d summary events over %d rounds, %d of them Ready", events, rounds, ready)
	if ready > 0 {
		t.Errorf("%d summaries showed Ready=True, a state the rows never had", ready)
	}
}

// TestOwnerRowsKeepsIndexInStep: removing a row moves the last row into its
// place; the index must follow, or a later put would overwrite the wrong
// row and a later remove forget the wrong one.
func TestOwnerRowsKeepsIndexInStep(t *testing.T) {
	o := &ownerRows{index: map[string]int{}}
	for _, n := range []string{"a", "b", "c", "d"} {
		if !o.put(Row{Name: n, Phase: "Pending"}) {
			t.Fatalf("put %s: reported unchanged", n)
		}
	}
	if o.put(Row{Name: "b", Phase: "Pending"}) {
		t.Error("put of an identical row reported a change")
	}
	o.remove("a")    // d moves to a's place
	o.remove("nope") // not there: nothing happens
	if !o.put(Row{Name: "d", Phase: "Synced"}) {
		t.Error("put of a changed row reported no change")
	}
	o.remove("c")
	got := map[string]string{}
	for _, r := range o.rows {
		got[r.Name] = string(r.Phase)
	}
	want := map[string]string{"b": "Pending", "d": "Synced"}
	if len(got) != len(want) || got["b"] != want["b"] || got["d"] != want["d"] {
		t.Errorf("rows = %v, want %v", got, want)
	}
	for name, i := range o.index {
		if o.rows[i].Name != name {
			t.Errorf("index[%s] = %d, which holds %s", name, i, o.rows[i].Name)
		}
	}
	if len(o.index) != len(o.rows) {
		t.Errorf("index has %d names for %d rows", len(o.index), len(o.rows))
	}
}
