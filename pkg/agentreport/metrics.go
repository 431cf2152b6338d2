package agentreport

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// writesTotal counts this replica's upstream writes of Clusters' status
// objects and of pull delivery's liveness, so that their rate can be read off /metrics
// (docs/scale-out.md). Its only label is the kind of object: never a
// Cluster or row name.
var (
	writesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "agent_status_writes_total",
		Help:           "Upstream writes of Clusters' status objects and agents' liveness, by object: report (a pulled Cluster's report ConfigMap, on a status change), status (a pushed Cluster's status object, written by its deliverer on a status change), digest (this replica's liveness digests), digest_delete (an emptied or gone replica's digest).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"object"})

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the registry the API server serves
// on /metrics.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(writesTotal)
	})
}
