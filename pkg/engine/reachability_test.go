package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/downstream"
)

// lockedPublishes records what the engine publishes for c1 from its own
// goroutines.
type lockedPublishes struct {
	mu   sync.Mutex
	last map[string]copycontract.Status
}

func (p *lockedPublishes) publish(cluster string, rows map[string]copycontract.Status, _ []copycontract.Leftover) {
	if cluster != clusterKey {
		return
	}
	p.mu.Lock()
	p.last = rows
	p.mu.Unlock()
}

// all reports whether the last publish had rowKey with phase.
func (p *lockedPublishes) has(rowKey string, phase courier.CopyPhase) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[rowKey].Phase == phase
}

// onlyC1 is a Downstream with a client for Cluster c1 only: the other
// Clusters of the test's lister have none, so their passes touch nothing.
type onlyC1 struct{ c1 *downstream.Client }

func (d onlyC1) Get(_ context.Context, c *fleet.Cluster) (*downstream.Client, error) {
	if c.Namespace+"/"+c.Name != clusterKey {
		return nil, errors.New("no client in this test")
	}
	return d.c1, nil
}

func (onlyC1) Forget(string) {}

// A Cluster that answers again waits for nothing but its own next pass:
// not the retry backoff its failures earned (an hour here), and not for a
// fan-out elsewhere to end before its rows are published (a pass is held
// running throughout, so the engine is never idle, and the publish delay
// is an hour too). The Cluster going down is published at once as well.
func TestClusterBackWaitsOnlyForItsPass(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	var isDown atomic.Bool
	isDown.Store(true)
	down.kube.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if isDown.Load() {
			return true, nil, connRefused()
		}
		return false, nil, nil
	})
	db := srcSecret("db", "7")
	env := newEnv(t, down, db)
	pub := &lockedPublishes{}
	env.e.cfg.Publish = pub.publish
	env.e.cfg.MinBackoff, env.e.cfg.MaxBackoff, env.e.cfg.MaxPublishDelay = time.Hour, time.Hour, time.Hour
	env.e.queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour))
	env.e.cfg.Downstream = onlyC1{down.client()}
	env.e.cfg.ProbeInterval = 50 * time.Millisecond
	env.e.cfg.Probe = func(context.Context, *downstream.Client) error {
		if isDown.Load() {
			return connRefused()
		}
		return nil
	}
	fanOut := env.e.passes.start() // another Cluster's pass, running throughout
	defer fanOut()

	r := rowOf(db)
	env.setDesired(r)
	ctx, cancel := context.WithCancel(env.ctx)
	done := make(chan struct{})
	go func() { env.e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: not within 30 s (the backoff and the publish delay are an hour)", what)
		}
	}
	waitFor("the row published Unreachable while the engine is busy", func() bool { return pub.has(keyOf(r), courier.CopyPhaseUnreachable) })
	if !env.e.reach.isDown(clusterKey) {
		t.Fatal("the Cluster's pass did not record it down")
	}

	isDown.Store(false)
	waitFor("the copy written after the Cluster answers", func() bool { _, ok := down.secret(targetNS, "db"); return ok })
	waitFor("the row published Synced after the Cluster answers", func() bool { return pub.has(keyOf(r), courier.CopyPhaseSynced) })
	if env.e.reach.isDown(clusterKey) {
		t.Error("the Cluster is still recorded down after a pass that reached it")
	}
}
