package bench

import (
	"context"
	"fmt"
	"time"
)

// courierWindow adds up what Courier did over the windows of one kind of
// measurement (a new HelmOp, rounds of every source, rounds of one
// source): each window runs from just before the change until Courier is
// idle again.
type courierWindow struct {
	windows    int
	cpu        time.Duration
	metrics    metrics // deltas of Courier's /metrics
	downstream metrics // deltas of the downstream kube-apiservers' /metrics
	upstream   metrics // deltas of the upstream kube-apiserver's /metrics
}

// openWindow is the state at a window's start.
type openWindow struct {
	cpu     time.Duration
	m, d, u metrics
	failed  bool
}

func (s *scaleRun) openWindow() openWindow {
	ctx := context.Background()
	var w openWindow
	var err error
	if w.d, err = scrapeDownstreams(ctx); err != nil {
		s.t.Logf("scraping the downstreams' /metrics: %v", err)
		w.failed = true
	}
	if w.m, err = scrape(ctx); err != nil {
		s.t.Logf("scraping Courier's /metrics: %v", err)
		w.failed = true
	}
	if w.u, err = scrapeFrom(ctx, env.Upstream.Config); err != nil {
		s.t.Logf("scraping the upstream's /metrics: %v", err)
		w.failed = true
	}
	w.cpu = mustCPU(s.t, s.pid)
	return w
}

func (s *scaleRun) closeWindow(w openWindow, kind string) {
	ctx := context.Background()
	cpu := mustCPU(s.t, s.pid)
	m, err1 := scrape(ctx)
	d, err2 := scrapeDownstreams(ctx)
	u, err3 := scrapeFrom(ctx, env.Upstream.Config)
	if w.failed || err1 != nil || err2 != nil || err3 != nil {
		s.t.Logf("no diagnostics for this %s window: %v %v %v", kind, err1, err2, err3)
		return
	}
	if s.diag == nil {
		s.diag = map[string]*courierWindow{}
	}
	cw := s.diag[kind]
	if cw == nil {
		cw = &courierWindow{metrics: metrics{}, downstream: metrics{}, upstream: metrics{}}
		s.diag[kind] = cw
	}
	cw.windows++
	cw.cpu += cpu - w.cpu
	cw.metrics.add(w.m, m)
	cw.downstream.add(w.d, d)
	cw.upstream.add(w.u, u)
}

// text says, per window (the mean over the windows), how much work
// Courier did: from its CPU time and the deltas of its /metrics, then the
// requests the downstream kube-apiservers received in the same windows
// (only Courier sends resource requests there then; the clusters' own
// background requests, lease renewals and kube-controller-manager's
// discovery, show up too).
func (cw *courierWindow) text(n int, kind string, copies int, measuredMean time.Duration) string {
	rounds := float64(cw.windows)
	per := func(v float64) float64 { return v / rounds }
	d := cw.metrics
	mean := func(name, label string) string {
		c := d.sum(name+"_count", label)
		if c == 0 {
			return "-"
		}
		return ms(time.Duration(d.sum(name+"_sum", label) / c * float64(time.Second)))
	}
	clusters := `name="courier_clusters"`
	view := `name="downstreamcopies"`
	return fmt.Sprintf("N=%d, Courier per %s window (mean of %d; %d copies each): CPU %s; allocated %.1f MB in %.1f GC cycles "+
		"(go_memstats_alloc_bytes_total, go_gc_duration_seconds_count); cluster reconciles %.0f (workqueue courier_clusters adds), "+
		"mean wait in queue %s, mean reconcile %s; passes %.0f whole, %.0f over changed sources only (courier_cluster_passes_total); view recomputes %.0f (mean %s); copies written %.0f, found current %.0f, failed %.0f; "+
		"courier_copy_propagation_seconds mean %s (Courier's clock: from seeing the new source resourceVersion to the write) "+
		"against a measured mean of %s (change started -> copy seen downstream); "+
		"requests to the downstream kube-apiservers (the 10 most): %s; to the upstream kube-apiserver (everyone's, the benchmark's own included; the 8 most): %s",
		n, kind, cw.windows, copies, (cw.cpu / time.Duration(cw.windows)).Round(10*time.Millisecond),
		per(d.sum("go_memstats_alloc_bytes_total"))/1e6, per(d.sum("go_gc_duration_seconds_count")),
		per(d.sum("workqueue_adds_total", clusters)), mean("workqueue_queue_duration_seconds", clusters), mean("workqueue_work_duration_seconds", clusters),
		per(d.sum("courier_cluster_passes_total", `scope="whole"`)), per(d.sum("courier_cluster_passes_total", `scope="sources"`)),
		per(d.sum("workqueue_adds_total", view)), mean("workqueue_work_duration_seconds", view),
		per(d.sum("courier_copies_total", `result="written"`)), per(d.sum("courier_copies_total", `result="current"`)),
		per(d.sum("courier_copies_total", `result="failed"`)), mean("courier_copy_propagation_seconds", ""), ms(measuredMean),
		cw.downstream.scale(rounds).requests(10), cw.upstream.scale(rounds).requests(8))
}
