package sharding

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics served on /metrics, labelled with the replica's identity (one
// series per process in production; tests run several Managers in one).
var (
	bucketsHeld = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "courier",
		Subsystem:      "shard",
		Name:           "buckets_held",
		Help:           "Buckets whose Lease this replica holds: it delivers to their Clusters.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"identity"})
	bucketsUnowned = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "courier",
		Subsystem: "shard",
		Name:      "buckets_unowned",
		Help: "Buckets this replica has seen without a valid holder (no Lease, released, or expired by its clock) " +
			"for more than twice the lease duration: their Clusters get no deliveries. Alert when above 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"identity"})
	clustersDelivered = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "courier",
		Subsystem:      "shard",
		Name:           "clusters_delivered",
		Help:           "Pushed Clusters in the buckets this replica holds: the Clusters it delivers to.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"identity"})
	clustersUnowned = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "courier",
		Subsystem: "shard",
		Name:      "clusters_unowned",
		Help: "Pushed Clusters whose bucket this replica has seen without a valid holder for more than twice the lease " +
			"duration: nothing delivers to them. Alert when above 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"identity"})

	registerOnce sync.Once
)

// registerMetrics adds the shard metrics to the registry the API server
// serves on /metrics.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(bucketsHeld, bucketsUnowned, clustersDelivered, clustersUnowned)
	})
}

// updateMetrics sets the gauges from what this replica holds and sees.
// A bucket counts as without owner from the first pass that sees it free
// until a pass sees a valid holder.
func (m *Manager) updateMetrics(now time.Time) {
	registerMetrics()
	unowned := 0
	longUnowned := map[int]bool{}
	for b := 0; b < m.cfg.Buckets; b++ {
		if m.Owns(b) || m.heldElsewhere(now, b) {
			delete(m.unheldSince, b)
			continue
		}
		since, ok := m.unheldSince[b]
		if !ok {
			m.unheldSince[b] = now
			continue
		}
		if now.Sub(since) > 2*m.cfg.LeaseDuration {
			unowned++
			longUnowned[b] = true
		}
	}
	bucketsHeld.WithLabelValues(m.cfg.Identity).Set(float64(len(m.Held())))
	bucketsUnowned.WithLabelValues(m.cfg.Identity).Set(float64(unowned))
	if m.cfg.Clusters == nil {
		return
	}
	delivered, orphans := 0, 0
	for _, c := range m.cfg.Clusters() {
		b := Bucket(c.Namespace, c.Name, m.cfg.Buckets)
		if m.Owns(b) {
			delivered++
		}
		if longUnowned[b] {
			orphans++
		}
	}
	clustersDelivered.WithLabelValues(m.cfg.Identity).Set(float64(delivered))
	clustersUnowned.WithLabelValues(m.cfg.Identity).Set(float64(orphans))
}

// heldElsewhere says whether b's Lease names a holder that is not gone
// by this replica's observation.
func (m *Manager) heldElsewhere(now time.Time, b int) bool {
	return m.otherHolder(now, b) != ""
}

// forgetMetrics removes this replica's series once it left.
func (m *Manager) forgetMetrics() {
	bucketsHeld.DeleteLabelValues(m.cfg.Identity)
	bucketsUnowned.DeleteLabelValues(m.cfg.Identity)
	clustersDelivered.DeleteLabelValues(m.cfg.Identity)
	clustersUnowned.DeleteLabelValues(m.cfg.Identity)
}
