package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchSetupSlotsAreGivenBack: each watch takes one of
// --max-watch-setups-inflight slots on arrival and gives it back once its
// watcher is registered (the store's WatchInitialized), not when the watch
// ends: with watches open and served through the aggregator, none is
// counted as being set up.
func TestWatchSetupSlotsAreGivenBack(t *testing.T) {
	before := metricValue(scrape(t), "courier_watch_setups_total")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := upstreamClients(t).courier.CourierV1alpha1()
	opens := []func() (watch.Interface, error){
		func() (watch.Interface, error) { return c.DownstreamCopies("default").Watch(ctx, metav1.ListOptions{}) },
		func() (watch.Interface, error) {
			return c.DownstreamCopySummaries("default").Watch(ctx, metav1.ListOptions{})
		},
		func() (watch.Interface, error) { return c.FieldCopies("default").Watch(ctx, metav1.ListOptions{}) },
	}
	watches := float64(len(opens))
	var results []<-chan struct{}
	for i, open := range opens {
		w, err := open()
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		defer w.Stop()
		results = append(results, closedWhenStopped(w.ResultChan()))
	}

	metrics := scrape(t)
	if got := metricValue(metrics, "courier_watch_setups_total"); got < before+watches {
		t.Errorf("courier_watch_setups_total %v, want at least %v: the watches did not pass the limit", got, before+watches)
	}
	if got := metricValue(metrics, "courier_watch_setups_inflight"); got != 0 {
		t.Errorf("courier_watch_setups_inflight %v with every watch set up, want 0", got)
	}
	if !strings.Contains(metrics, "courier_watch_setups_refused_total 0") {
		t.Errorf("a watch was refused: %s", grepLines(metrics, "courier_watch_setups_refused_total"))
	}
	for i, done := range results {
		select {
		case <-done:
			t.Errorf("watch %d ended before the check: the gauge above proves nothing for it", i)
		default:
		}
	}
}

// closedWhenStopped returns a channel closed once events, a watch's result
// channel, is closed.
func closedWhenStopped[T any](events <-chan T) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range events {
		}
	}()
	return done
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
