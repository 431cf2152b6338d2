package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/test/localenv"
)

// Leftover copies on every replica (docs/design.md#scale-out): a copy kept
// under keepResources that nothing lists any more is found by the sweep
// of its Cluster's deliverer only; its Kept row shows on every replica
// all the same, from the Cluster's status object.

// keeperOp is the test HelmOp whose copies are kept; it lists sources to
// sc01 only, into shardKeepNS.
const (
	keeperOp    = "keeper"
	shardKeepNS = "shard-keep"
)

// keeperRows reads the keeper's rows from one replica directly (its own
// secure port, not the aggregator): source name -> phase.
func keeperRows(t *testing.T, c *localenv.Courier) (map[string]string, error) {
	t.Helper()
	list, err := listOnReplica(t, c, shardNS)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range list.Items {
		if r.Spec.HelmOp == keeperOp {
			out[r.Spec.Source.Name] = string(r.Status.Phase)
		}
	}
	return out, nil
}

// waitKeeperRows waits until replica c shows exactly the keeper rows want
// (source name -> phase).
func waitKeeperRows(t *testing.T, c *localenv.Courier, what string, want map[string]string) {
	t.Helper()
	eventually(t, c.Name()+": "+what, func() (bool, string) {
		got, err := keeperRows(t, c)
		if err != nil {
			return false, err.Error()
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("rows %v, want %v", got, want)
	})
}

// setKeeper creates or updates the keeper HelmOp to list sources, with
// keepResources keep.
func (f *shardFleet) setKeeper(t *testing.T, keep bool, sources ...string) {
	t.Helper()
	ctx := context.Background()
	ops := f.fc.FleetV1alpha1().HelmOps(shardNS)
	op, err := ops.Get(ctx, keeperOp, metav1.GetOptions{})
	create := err != nil
	if create {
		op = &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: keeperOp}}
		target := fleet.BundleTarget{ClusterName: shardCluster(1)}
		target.TargetNamespace = shardKeepNS
		op.Spec.Targets = []fleet.BundleTarget{target}
	}
	op.Spec.KeepResources = keep
	op.Spec.DownstreamResources = nil
	for _, s := range sources {
		op.Spec.DownstreamResources = append(op.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "Secret", Name: s})
	}
	if create {
		_, err = ops.Create(ctx, op, metav1.CreateOptions{})
	} else {
		_, err = ops.Update(ctx, op, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// checkLeftoversEverywhere: a copy kept after its entry is removed shows
// Kept on its Cluster's deliverer first (the positive control), then on
// every other replica, read directly; listed again, its row is Synced on
// every replica; the HelmOp gone, both copies show Kept everywhere, and
// once they are removed downstream their rows go everywhere.
func (f *shardFleet) checkLeftoversEverywhere(t *testing.T) {
	holder := owners(t)[1]
	var deliverer *localenv.Courier
	others := []*localenv.Courier{}
	for _, r := range f.replicas {
		if r.Name() == holder {
			deliverer = r
		} else {
			others = append(others, r)
		}
	}
	if deliverer == nil || len(others) == 0 {
		t.Fatalf("%s holds %s's bucket: not one of the replicas, or no other replica", holder, shardCluster(1))
	}
	both := map[string]string{"s0": "Synced", "s1": "Synced"}
	f.setKeeper(t, true, shardSources...)
	waitKeeperRows(t, deliverer, "both copies Synced", both)

	f.setKeeper(t, true, "s0")
	kept := map[string]string{"s0": "Synced", "s1": "Kept"}
	waitKeeperRows(t, deliverer, "the delivering replica shows the Kept row (positive control)", kept)
	for _, r := range others {
		waitKeeperRows(t, r, "a replica that does not deliver to "+shardCluster(1)+" shows the Kept row", kept)
	}
	t.Logf("the Kept row of %s shows on the deliverer %s and on %d other replicas", shardCluster(1), holder, len(others))

	f.setKeeper(t, true, shardSources...)
	for _, r := range f.replicas {
		waitKeeperRows(t, r, "the entry listed again: its row is Synced, not Kept", both)
	}

	// The HelmOp gone: both copies stay, Kept, on every replica (the
	// leftovers of an owner that is gone). Removed downstream, they go,
	// and their rows with them, on every replica.
	if err := f.fc.FleetV1alpha1().HelmOps(shardNS).Delete(context.Background(), keeperOp, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	allKept := map[string]string{"s0": "Kept", "s1": "Kept"}
	waitKeeperRows(t, deliverer, "the HelmOp gone: both copies Kept (positive control)", allKept)
	for _, r := range others {
		waitKeeperRows(t, r, "the HelmOp gone: both copies Kept", allKept)
	}
	down := downstream(t, 0) // sc01's (fleetsim.CreateClusters)
	for _, s := range shardSources {
		if err := down.CoreV1().Secrets(shardKeepNS).Delete(context.Background(), s, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range f.replicas {
		waitKeeperRows(t, r, "the kept copies removed downstream: their rows go", map[string]string{})
	}
	names := make([]string, len(f.replicas))
	for i, r := range f.replicas {
		names[i] = r.Name()
	}
	sort.Strings(names)
	t.Logf("replicas checked: %s", strings.Join(names, ", "))
}
