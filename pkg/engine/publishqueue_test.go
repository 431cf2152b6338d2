package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/courier-dev/courier/pkg/sharding"
)

// TestPublishQueueDue: while the engine is busy only Clusters that have
// waited the bound are due; once it is idle every waiting one is. A
// Cluster marked again keeps its first time.
func TestPublishQueueDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const bound = 5 * time.Second
	tests := []struct {
		name string
		at   time.Duration // since t0
		idle bool
		want []string
	}{
		{name: "busy, nothing waited long enough", at: 4 * time.Second},
		{name: "busy, the first Cluster waited the bound", at: 5 * time.Second, want: []string{"ns/a"}},
		{name: "idle: every waiting Cluster", at: time.Second, idle: true, want: []string{"ns/a", "ns/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newPublishQueue()
			q.mark("ns/a", t0)
			q.mark("ns/b", t0.Add(3*time.Second))
			q.mark("ns/a", t0.Add(3*time.Second)) // keeps t0
			got := q.due(t0.Add(tt.at), tt.idle, bound)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("due = %v, want %v", got, tt.want)
			}
			if q.empty() != (len(tt.want) == 2) {
				t.Errorf("empty() = %v after taking %v", q.empty(), got)
			}
		})
	}
}

// A pass's statuses wait while other Clusters are queued for a pass, and
// are published once the queue is empty, or once the bound has passed.
// The control: the same pass with nothing else queued publishes at once.
func TestPublishWaitsForCopies(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	db := srcSecret("db", "7")
	env := newEnv(t, down, db)
	pub := recordPublishes(env)
	if err := env.reconcile(rowOf(db)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	drain(env.e.queue)
	now := time.Unix(5000, 0)
	env.e.now = func() time.Time { return now }

	env.e.toPublish.mark(clusterKey, now)
	env.e.publishDue()
	if n := len(pub.got[clusterKey]); n != 1 {
		t.Fatalf("idle engine: published %d times, want 1 (control)", n)
	}

	env.e.toPublish.mark(clusterKey, now)
	env.e.queue.Add("fleet-default/another") // a pass still to come
	env.e.publishDue()
	if n := len(pub.got[clusterKey]); n != 1 {
		t.Fatalf("busy engine: published %d times, want still 1", n)
	}
	now = now.Add(env.e.cfg.MaxPublishDelay)
	env.e.publishDue()
	if n := len(pub.got[clusterKey]); n != 2 {
		t.Fatalf("busy engine after the bound: published %d times, want 2", n)
	}
}

// A Cluster whose bucket is handed over has its waiting statuses published
// before BucketsChanged returns (and so before the Lease is released),
// although Owns already says false; a Cluster of a bucket kept waits on.
func TestHandoverPublishesWaitingStatuses(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	db := srcSecret("db", "7")
	env := newEnv(t, down, db)
	shards := sharded(env)
	pub := recordPublishes(env)
	b := sharding.Bucket(fleetNS, "c1", testBuckets)
	shards.set(b, true)
	if err := env.reconcile(rowOf(db)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	drain(env.e.queue)
	env.e.queue.Add("fleet-default/another") // busy: nothing falls due
	env.e.toPublish.mark(clusterKey, env.e.now())
	env.e.BucketsChanged(nil, []int{(b + 1) % testBuckets})
	if n := len(pub.got[clusterKey]); n != 0 {
		t.Fatalf("losing another bucket published c1 %d times", n)
	}
	shards.set(b, false)
	env.e.BucketsChanged(nil, []int{b})
	if n := len(pub.got[clusterKey]); n != 1 {
		t.Fatalf("handing c1's bucket over published it %d times, want 1", n)
	}
}
