package agentwatch

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	watches = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "courier",
		Name:           "agent_watches",
		Help:           "Watches of one Cluster's downstreamcopies (fieldSelector spec.cluster, every courier-agent's) being served; they are not in apiserver_longrunning_requests.",
		StabilityLevel: metrics.ALPHA,
	})
	events = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "agent_watch_events_total",
		Help:           "Events sent to watches of one Cluster's downstreamcopies; they are not in apiserver_watch_events_total.",
		StabilityLevel: metrics.ALPHA,
	})
	encodeErrors = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "agent_watch_encode_errors_total",
		Help:           "Events of watches of one Cluster's downstreamcopies that could not be encoded; each ended its watch, and the client watched again.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(watches, events, encodeErrors)
	})
}
