package engine

import (
	"testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/sharding"
)

// publishes records what the engine publishes, by Cluster.
type publishes struct {
	got  map[string][]map[string]copycontract.Status
	left map[string][][]copycontract.Leftover
}

func recordPublishes(env *testEnv) *publishes {
	p := &publishes{got: map[string][]map[string]copycontract.Status{}, left: map[string][][]copycontract.Leftover{}}
	env.e.cfg.Publish = func(cluster string, rows map[string]copycontract.Status, left []copycontract.Leftover) {
		p.got[cluster] = append(p.got[cluster], rows)
		p.left[cluster] = append(p.left[cluster], left)
	}
	return p
}

// The holder publishes a Cluster's leftover copies with its statuses once
// a sweep found them (none is an empty list, not nil), and nil before:
// the object then keeps what the previous holder published.
func TestPublishLeftoversOnceSwept(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	db := srcSecret("db", "7")
	env := newEnv(t, down, db)
	shards := sharded(env)
	pub := recordPublishes(env)
	shards.set(sharding.Bucket(fleetNS, "c1", testBuckets), true)
	env.e.publish(clusterKey)
	if n := len(pub.left[clusterKey]); n != 1 || pub.left[clusterKey][0] != nil {
		t.Fatalf("before a sweep published leftovers %v, want nil once", pub.left[clusterKey])
	}
	if err := env.reconcile(rowOf(db)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	env.e.publishDue()
	last := pub.left[clusterKey][len(pub.left[clusterKey])-1]
	if last == nil || len(last) != 0 {
		t.Fatalf("after a whole pass without leftovers published %v, want an empty list", last)
	}
	kept := copycontract.Leftover{HelmOp: copycontract.OwnerKey(fleetNS, rowOf(db).Spec), Cluster: "c1", Kind: "Secret", Name: "old",
		TargetNamespace: targetNamespace.Name, Keep: true, Phase: courier.CopyPhaseKept}
	env.e.statuses.setLeftovers(clusterKey, []copycontract.Leftover{kept})
	env.e.publish(clusterKey)
	last = pub.left[clusterKey][len(pub.left[clusterKey])-1]
	if len(last) != 1 || last[0] != kept {
		t.Errorf("published leftovers %v, want %v", last, kept)
	}
}

// Only the replica delivering to a Cluster publishes its rows' statuses,
// every row of the Cluster at once, after each pass.
func TestPublishOnlyWhileDelivering(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	db, api := srcSecret("db", "7"), srcSecret("api", "8")
	env := newEnv(t, down, db, api)
	shards := sharded(env)
	pub := recordPublishes(env)
	rows := []*courier.DownstreamCopy{rowFor("app", "c1", "Secret", "db", "7", courier.CopyPhasePending),
		rowFor("app", "c1", "Secret", "api", "8", courier.CopyPhasePending)}
	if err := env.reconcile(rows...); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	env.e.publishDue()
	if n := len(pub.got[clusterKey]); n != 0 {
		t.Fatalf("a replica not holding the bucket published %d times", n)
	}
	shards.set(sharding.Bucket(fleetNS, "c1", testBuckets), true)
	if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
		t.Fatalf("reconcile as holder: %v", err)
	}
	env.e.publishDue()
	if n := len(pub.got[clusterKey]); n != 1 {
		t.Fatalf("the holder published %d times after one pass, want 1", n)
	}
	got := pub.got[clusterKey][0]
	if len(got) != 2 {
		t.Fatalf("published %d rows, want both: %v", len(got), got)
	}
	for _, r := range rows {
		st := got[keyOf(r)]
		if st.Phase != courier.CopyPhaseSynced || st.SyncedResourceVersion != r.Spec.Source.ResourceVersion {
			t.Errorf("row %s published as %+v", keyOf(r), st)
		}
	}
}

// Without sharding the leader delivers, and publishes; a follower does not.
func TestPublishByTheLeaderWithoutSharding(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	db := srcSecret("db", "7")
	env := newEnv(t, down, db)
	pub := recordPublishes(env)
	env.e.SetLeading(false)
	if err := env.reconcile(rowOf(db)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	env.e.publishDue()
	if n := len(pub.got[clusterKey]); n != 0 {
		t.Fatalf("a follower published %d times", n)
	}
	env.e.SetLeading(true)
	drain(env.e.queue)
	if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
		t.Fatalf("reconcile as leader: %v", err)
	}
	env.e.publishDue()
	if n := len(pub.got[clusterKey]); n != 1 || pub.got[clusterKey][0][keyOf(rowOf(db))].Phase != courier.CopyPhaseSynced {
		t.Errorf("the leader published %v", pub.got[clusterKey])
	}
}
