package downstream

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// clientsOpen counts the Clusters whose client a Cache holds -- each with
// its informers, reading through its connection's watches. With sharded
// delivery a replica holds clients only for the Clusters it delivers to,
// and this gauge shows it (DESIGN §10). Labels carry nothing: the count
// alone.
var (
	clientsOpen = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "courier",
		Name:           "downstream_clients",
		Help:           "Downstream clusters this process holds a client and informers for.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(clientsOpen) })
}
