package engine

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
)

// Over one resync period every Cluster is queued for a whole pass exactly
// once, and no part of the period queues much more than its share: 600
// Clusters in 60 parts are about 10 a part, where queueing them all at
// once put 600 in one.
func TestResyncSpreadsTheClustersOverThePeriod(t *testing.T) {
	const n = 600
	env := newEnv(t, nil)
	clusters := newIndexer()
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		_ = clusters.Add(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: name}})
		// A pass over one row owed: the resync must make it whole.
		env.e.scopes.oweRows(fleetNS+"/"+name, "r1")
	}
	env.e.cfg.Clusters = fleetlisters.NewClusterLister(clusters)
	drain(env.e.queue)

	seen := map[string]int{}
	largest := 0
	for slot := range resyncSlots {
		env.e.queueResyncSlot(slot)
		keys := drain(env.e.queue)
		largest = max(largest, len(keys))
		for _, k := range keys {
			seen[k]++
			if env.e.scopes.take(k) != nil {
				t.Errorf("%s queued for a pass over some rows, want a whole pass", k)
			}
		}
	}
	if len(seen) != n {
		t.Errorf("%d Clusters queued over a period, want all %d", len(seen), n)
	}
	for k, times := range seen {
		if times != 1 {
			t.Errorf("%s queued %d times over a period, want once", k, times)
		}
	}
	if mean := n / resyncSlots; largest > 3*mean {
		t.Errorf("a part of the period queued %d Clusters, want at most %d (3 times the mean)", largest, 3*mean)
	}
}
