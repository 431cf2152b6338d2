package engine

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	// Registers client-go's workqueue metrics (workqueue_depth,
	// workqueue_adds_total, ... labelled name="courier_clusters") with the
	// registry served on /metrics.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
)

// Metrics served on /metrics. Labels never carry secret data: only the
// outcome, a reason word, and cluster names.
var (
	copiesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "copies_total",
		Help:           "Downstream copies handled, by result (written, current, failed, deleted) and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result", "reason"})
	propagationSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "courier",
		Name:           "copy_propagation_seconds",
		Help:           "Time from Courier observing a source change to the copy being written downstream.",
		Buckets:        []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		StabilityLevel: metrics.ALPHA,
	})
	clusterReachable = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "courier",
		Name:           "cluster_reachable",
		Help:           "1 when the downstream cluster answered Courier's last request, 0 when it did not.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	passesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "courier",
		Name:      "cluster_passes_total",
		Help: "Passes over a downstream cluster, by scope: whole (every row, then the sweep) or sources " +
			"(only rows whose source changed since the last pass).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"scope"})

	registerOnce sync.Once
)

// registerMetrics adds the engine's metrics to the registry the API server
// serves on /metrics.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(copiesTotal, propagationSeconds, clusterReachable, passesTotal)
	})
}
