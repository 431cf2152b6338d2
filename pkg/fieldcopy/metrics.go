package fieldcopy

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// writesTotal counts writes of targets by result. Its only label is the
// outcome: never a value, a path or an object name.
var (
	writesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "fieldcopy_writes_total",
		Help:           "Writes of field-copy targets, by result (written, conflict, failed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	registerOnce sync.Once
)

// registerMetrics adds the field-copy metrics to the registry the API
// server serves on /metrics.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(writesTotal)
	})
}
