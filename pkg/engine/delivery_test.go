package engine

import (
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/sharding"
)

// fakeShards holds the buckets a test says.
type fakeShards struct {
	mu   sync.Mutex
	held map[int]bool
}

func (f *fakeShards) Owns(b int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[b]
}

func (f *fakeShards) set(b int, held bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[b] = held
}

const testBuckets = 64

// sharded turns sharded delivery on for env's engine, holding no bucket.
func sharded(env *testEnv) *fakeShards {
	s := &fakeShards{held: map[int]bool{}}
	env.e.cfg.Shards = &ShardConfig{Shards: s, Buckets: testBuckets, WriteTimeout: 5 * time.Second}
	return s
}

// With sharding, the lease decides nothing: a replica passes over, builds
// a client for (and so watches) and writes for a Cluster exactly while it
// holds the Cluster's bucket. Gaining the bucket queues the Clusters in it,
// and only those; losing it queues them again, and that pass drops the
// client and the rows' statuses.
func TestShardedDeliveryFollowsBuckets(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	db := srcSecret("db", "7")
	env := newEnv(t, down, db)
	shards := sharded(env)
	env.e.SetLeading(true) // ignored with sharding
	r := rowOf(db)
	if err := env.reconcile(r); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if env.ds.gets != 0 || len(down.kube.Actions()) != 0 {
		t.Fatalf("a replica not holding the bucket built a client (%d) or sent requests %q", env.ds.gets, env.downActions())
	}
	if st, ok := env.status(r); ok {
		t.Fatalf("a replica not holding the bucket recorded %+v", st)
	}
	b := sharding.Bucket(fleetNS, "c1", testBuckets)
	drain(env.e.queue)
	shards.set(b, true)
	env.e.BucketsChanged([]int{b}, nil)
	queued := drain(env.e.queue)
	for _, key := range queued {
		ns, name := copycontract.SplitKey(key)
		if sharding.Bucket(ns, name, testBuckets) != b {
			t.Errorf("gaining bucket %d queued %s of another bucket", b, key)
		}
	}
	if !slices.Contains(queued, clusterKey) {
		t.Fatalf("gaining bucket %d did not queue %s: %v", b, clusterKey, queued)
	}
	if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
		t.Fatalf("reconcile as owner: %v", err)
	}
	if env.ds.gets != 1 {
		t.Errorf("the holder's pass built %d clients, want 1", env.ds.gets)
	}
	checkActions(t, "owner's writes", actionStrings(writes(down.kube.Actions())), []string{"create namespaces apps", "create secrets apps/db"})
	if st := env.mustStatus(r); st.Phase != courier.CopyPhaseSynced || st.SyncedResourceVersion != "7" {
		t.Errorf("the holder recorded %+v", st)
	}

	// The bucket is lost: the Cluster is queued, and its pass only drops.
	shards.set(b, false)
	env.ds.forgotten, env.changes = nil, nil
	env.e.BucketsChanged(nil, []int{b})
	if q := drain(env.e.queue); !slices.Contains(q, clusterKey) {
		t.Fatalf("losing bucket %d did not queue %s: %v", b, clusterKey, q)
	}
	down.kube.ClearActions()
	if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
		t.Fatalf("reconcile after the loss: %v", err)
	}
	if env.ds.gets != 1 || len(down.kube.Actions()) != 0 {
		t.Errorf("after the loss: %d clients built, requests %q", env.ds.gets, env.downActions())
	}
	if !slices.Contains(env.ds.forgotten, clusterKey) {
		t.Errorf("the client of a lost Cluster was not dropped: forgotten %v", env.ds.forgotten)
	}
	if st, ok := env.status(r); ok {
		t.Errorf("the status of a lost Cluster's row stayed: %+v", st)
	}
	if len(env.changes) != 1 || !slices.Contains(env.changes[0].Rows, keyOf(r)) {
		t.Errorf("the view was told %+v, want the row whose status went", env.changes)
	}
}

// Losing a bucket returns only once the write in flight for it has
// finished, and no write starts after.
func TestLostBucketWaitsForWritesInFlight(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	down.kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil, nil
	})
	db := srcSecret("db", "7")
	env := newEnv(t, down, db, srcSecret("api", "8"))
	shards := sharded(env)
	b := sharding.Bucket(fleetNS, "c1", testBuckets)
	shards.set(b, true)
	env.setDesired(rowFor("app", "c1", "Secret", "db", "7", courier.CopyPhasePending),
		rowFor("app", "c1", "Secret", "api", "8", courier.CopyPhasePending))
	passDone := make(chan struct{})
	go func() { _ = env.e.reconcileCluster(env.ctx, clusterKey); close(passDone) }()
	<-entered
	shards.set(b, false) // the Manager turns Owns false before telling
	acked := make(chan struct{})
	go func() { env.e.BucketsChanged(nil, []int{b}); close(acked) }()
	select {
	case <-acked:
		t.Fatal("the loss was acknowledged while a write was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-acked:
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not acknowledged after the write finished")
	}
	<-passDone
	creates := 0
	for _, a := range down.kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "secrets" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("secret creates = %d, want 1 (the one in flight; none after the loss)", creates)
	}
}

// Gaining a bucket forgets the retry backoff its Clusters built up before
// (failures counted while another replica delivered), so the new owner's
// first retry comes after the base delay, not after up to MaxBackoff; a
// Cluster of a bucket not gained keeps its count (the control).
func TestGainedBucketForgetsBackoff(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	db := srcSecret("db", "7")
	env := newEnv(t, down, db)
	shards := sharded(env)
	if err := env.reconcile(rowOf(db)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	drain(env.e.queue)
	const other = "fleet-default/elsewhere"
	for range 8 {
		env.e.queue.AddRateLimited(clusterKey)
		env.e.queue.AddRateLimited(other)
	}
	if n := env.e.queue.NumRequeues(clusterKey); n != 8 {
		t.Fatalf("NumRequeues = %d before the gain, want 8", n)
	}
	b := sharding.Bucket(fleetNS, "c1", testBuckets)
	if ns, name := copycontract.SplitKey(other); sharding.Bucket(ns, name, testBuckets) == b {
		t.Fatalf("the control %s hashes into bucket %d too", other, b)
	}
	shards.set(b, true)
	env.e.BucketsChanged([]int{b}, nil)
	if n := env.e.queue.NumRequeues(clusterKey); n != 0 {
		t.Errorf("NumRequeues of %s = %d after its bucket was gained, want 0", clusterKey, n)
	}
	if n := env.e.queue.NumRequeues(other); n != 8 {
		t.Errorf("NumRequeues of %s (bucket not gained) = %d, want 8", other, n)
	}
}
