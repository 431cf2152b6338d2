package copysummary

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// Nobody watches the summaries: a row change waits for the idle window
// (an hour here) -- until a read's Sync, which recomputes at once; and a
// watcher who arrives is served within a window again.
func TestUnwatchedSummariesWaitForAReadOrAWatcher(t *testing.T) {
	rows := memstore.New[*courier.DownstreamCopy]()
	rows.Upsert(dcRow(helmOpApp, "a", "5", courier.CopyPhasePending, ""))
	s, out := run(t, rows, Options{Window: 10 * time.Millisecond, IdleWindow: time.Hour})
	// Positive control: the first flush is not held back.
	waitSummary(t, out, "app", readyIs(metav1.ConditionFalse, 1))
	recomputed := s.recomputed.Load()

	rows.Upsert(dcRow(helmOpApp, "a", "5", courier.CopyPhaseSynced, "5"))
	waitFor(t, "three windows with a dirty owner and nobody watching", func() bool { return s.deferred.Load() >= 3 })
	if got, _ := out.Get("ws", "app"); !readyIs(metav1.ConditionFalse, 1)(got) || s.recomputed.Load() != recomputed {
		t.Fatalf("recomputed with nobody watching: %+v (%d recomputes, want %d)", got, s.recomputed.Load(), recomputed)
	}

	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := out.Get("ws", "app"); !readyIs(metav1.ConditionTrue, 1)(got) {
		t.Fatalf("after Sync: %+v, want Ready", got)
	}

	w, err := out.Watch(context.Background(), "ws", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	drain(w, 1) // the summary as it is now
	rows.Upsert(dcRow(helmOpApp, "a", "6", courier.CopyPhasePending, "5"))
	select {
	case ev := <-w.ResultChan():
		if got, _ := ev.Object.(*courier.DownstreamCopySummary); !readyIs(metav1.ConditionFalse, 1)(got) {
			t.Errorf("watched: %+v, want not Ready", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a watched summary was not recomputed within 5s (window 10ms)")
	}
}

// Sync answers with every row change made before it was called, however
// many are still on their way to the summarizer.
func TestSyncCoversEveryRowChangeBeforeIt(t *testing.T) {
	rows := memstore.New[*courier.DownstreamCopy]()
	const n = 1000
	for i := range n {
		rows.Upsert(dcRow(helmOpApp, fmt.Sprintf("c%04d", i), "5", courier.CopyPhasePending, ""))
	}
	s, out := run(t, rows, Options{Window: 10 * time.Millisecond, IdleWindow: time.Hour})
	waitSummary(t, out, "app", readyIs(metav1.ConditionFalse, n))
	for round := range 3 {
		rv := fmt.Sprint(6 + round)
		for i := range n {
			rows.Upsert(dcRow(helmOpApp, fmt.Sprintf("c%04d", i), rv, courier.CopyPhaseSynced, rv))
		}
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, _ := out.Get("ws", "app")
		if !readyIs(metav1.ConditionTrue, n)(got) || got.Status.Sources[0].ResourceVersion != rv {
			t.Fatalf("round %d, after Sync: %+v, want all %d synced at %s", round, got, n, rv)
		}
	}
}

// Sync does not hold a read for long when no summarizer follows the rows.
func TestSyncWithoutALoopGivesUp(t *testing.T) {
	s := New(memstore.New[*courier.DownstreamCopy](), memstore.New[*courier.DownstreamCopySummary](), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Sync(ctx); err == nil {
		t.Fatal("Sync without a running summarizer returned no error")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
