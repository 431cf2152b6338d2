package downstream

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// clientsOpen counts the Clusters whose client a Cache holds -- each with
// its informers, reading through its connection's watches. With sharded
// delivery a replica holds clients only for the Clusters it delivers to,
// and this gauge shows it (docs/design.md#scale-out). Labels carry nothing: the count
// alone.
var (
	clientsOpen = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "courier",
		Name:           "downstream_clients",
		Help:           "Downstream clusters this process holds a client and informers for.",
		StabilityLevel: metrics.ALPHA,
	})

	// watchSetsSettling and watchRebuilds show the shared watches'
	// narrowing (generation.go): a replica is at its steady state once no
	// set is settling, and each rebuild cost a list of the Clusters it
	// selects.
	watchSetsSettling = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "courier",
		Name:           "downstream_watch_sets_settling",
		Help:           "Watches shared by the Clusters on one kube-apiserver connection whose membership changed since its last settle check; each may be rebuilt to select its Clusters only.",
		StabilityLevel: metrics.ALPHA,
	})
	watchRebuilds = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "downstream_watch_rebuilds_total",
		Help:           "Shared downstream watches rebuilt to select the Clusters reading through them; each rebuild lists their copies once.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(clientsOpen, watchSetsSettling, watchRebuilds) })
}
