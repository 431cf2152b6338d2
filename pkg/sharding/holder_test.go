package sharding

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	testclock "k8s.io/utils/clock/testing"
)

// Holder names this replica for its buckets and the other holder for the
// rest, until that holder's Lease expires by this replica's clock; the
// Cluster gauges count the Clusters of held and of long-unowned buckets.
func TestHolderAndClusterMetrics(t *testing.T) {
	store, clk := newFakeLeases(), testclock.NewFakeClock(t0)
	a := newTestManager(t, store, clk, "courier-a", nil)
	clusters := []types.NamespacedName{{Namespace: "fleet-default", Name: "c1"}, {Namespace: "fleet-default", Name: "c2"}}
	a.cfg.Clusters = func() []types.NamespacedName { return clusters }
	a.step(context.Background())
	b1 := Bucket("fleet-default", "c1", DefaultBuckets)
	if h := a.Holder(b1); h != "courier-a" {
		t.Fatalf("Holder(%d) on its holder = %q", b1, h)
	}
	if v, _ := testutil.GetGaugeMetricValue(clustersDelivered.WithLabelValues("courier-a")); v != 2 {
		t.Errorf("courier_shard_clusters_delivered = %v, want 2", v)
	}
	b := newTestManager(t, store, clk, "courier-b", nil)
	b.cfg.Clusters = a.cfg.Clusters
	if h := b.Holder(b1); h != "courier-a" {
		t.Errorf("Holder(%d) seen by another replica = %q, want courier-a", b1, h)
	}
	// courier-a stops renewing (killed): once its Leases expire by b's
	// clock they name nobody, and past twice the lease duration their
	// Clusters count as without owner, until b takes them.
	advance(clk, DefaultLeaseDuration)
	if h := b.Holder(b1); h != "" {
		t.Errorf("Holder(%d) after expiry = %q, want none", b1, h)
	}
	b.updateMetrics(clk.Now())
	advance(clk, 2*DefaultLeaseDuration+1)
	b.updateMetrics(clk.Now())
	if v, _ := testutil.GetGaugeMetricValue(clustersUnowned.WithLabelValues("courier-b")); v != 2 {
		t.Errorf("courier_shard_clusters_unowned = %v, want 2", v)
	}
	b.step(context.Background())
	if v, _ := testutil.GetGaugeMetricValue(clustersUnowned.WithLabelValues("courier-b")); v != 0 {
		t.Errorf("courier_shard_clusters_unowned after the take-over = %v, want 0", v)
	}
	if h := b.Holder(b1); h != "courier-b" {
		t.Errorf("Holder(%d) after the take-over = %q", b1, h)
	}
}
