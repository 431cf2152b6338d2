package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// A replica that does not hold the lease reads what it can (sources, its
// cache of copies, same-named objects) and records the same phases the
// leader would for what it can observe, but writes, removes and reports
// nothing. When it becomes the leader it writes what is still missing.
func TestFollowerObservesAndWritesNothing(t *testing.T) {
	db := srcSecret("db", "7")
	stale := srcSecret("db", "6") // what an out-of-date copy was made from
	removed := srcSecret("old", "3")
	cases := []struct {
		name      string
		existing  []runtime.Object
		want      copycontract.Status
		leaderDid []string // the writes after SetLeading(true)
		wantLeft  []string // the follower's leftover copies, as "phase: message"
	}{
		{
			name:     "copy missing",
			existing: []runtime.Object{targetNamespace},
			want:     copycontract.Status{Phase: courier.CopyPhasePending, Message: "Secret apps/db does not exist in cluster c1 yet; the leader writes it"},
			// Courier's own identity makes the namespace without reading it
			// first; it exists, which is fine (AlreadyExists).
			leaderDid: []string{"create namespaces apps", "create secrets apps/db"},
		},
		{
			name:      "copy out of date",
			existing:  []runtime.Object{targetNamespace, secretCopy(stale, targetNS, owner(appOp, "c1"))},
			want:      copycontract.Status{Phase: courier.CopyPhasePending, Message: "Secret apps/db in cluster c1 differs from its source; the leader updates it"},
			leaderDid: []string{"update secrets apps/db"},
		},
		{
			name:     "copy current",
			existing: []runtime.Object{targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1"))},
			want:     synced("7", syncedAt),
		},
		{
			name:     "object Courier does not own",
			existing: []runtime.Object{targetNamespace, unmanagedSecret(targetNS, "db")},
			want: copycontract.Status{Phase: courier.CopyPhaseConflict,
				Message: "Secret apps/db exists in cluster c1 and is not managed by Courier; it is left unchanged"},
		},
		{
			name:      "copy nothing wants any more is left to the leader",
			existing:  []runtime.Object{targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")), secretCopy(removed, targetNS, owner(appOp, "c1"))},
			want:      synced("7", syncedAt),
			leaderDid: []string{"delete secrets apps/old"},
			wantLeft:  []string{"Deleting: Secret apps/old in cluster c1 is no longer wanted; the leader removes it"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			down := newFakeCluster(true, tc.existing...)
			env := newEnv(t, down, db)
			env.e.SetLeading(false)
			r := rowOf(db)

			if err := env.reconcile(r); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if w := writes(down.kube.Actions()); len(w) != 0 {
				t.Errorf("a follower wrote %q", actionStrings(w))
			}
			if a := findAction(down.kube.Actions(), "create", "selfsubjectaccessreviews"); a != nil {
				t.Errorf("a follower checked permissions: %v", a)
			}
			checkActions(t, "event", env.takeEvents(), nil)
			checkStatus(t, "row", env.mustStatus(r), tc.want)
			var left []string
			for _, l := range env.leftovers() {
				left = append(left, string(l.Phase)+": "+l.Message)
			}
			checkActions(t, "leftovers", left, tc.wantLeft)

			// Becoming the leader queues every Cluster and writes what the
			// follower saw missing, and nothing else.
			env.e.SetLeading(true)
			if queued := drain(env.e.queue); len(queued) != 3 {
				t.Errorf("SetLeading(true) queued %v, want the three Clusters", queued)
			}
			down.kube.ClearActions()
			if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
				t.Fatalf("reconcile as leader: %v", err)
			}
			checkActions(t, "leader's writes", actionStrings(writes(down.kube.Actions())), tc.leaderDid)
			if left := env.leftovers(); len(left) != 0 {
				t.Errorf("leftovers after the leader's pass: %+v", left)
			}
			if got := env.mustStatus(r).Phase; got != tc.want.Phase && got != courier.CopyPhaseSynced {
				t.Errorf("phase after the leader's pass = %s", got)
			}
		})
	}
}

// SetLeading with the value the engine already has queues nothing: a
// renewed lease must not cause a pass over every cluster.
func TestSetLeadingUnchangedQueuesNothing(t *testing.T) {
	env := newEnv(t, newFakeCluster(true, targetNamespace), srcSecret("db", "7"))
	env.setDesired(rowOf(srcSecret("db", "7")))
	drain(env.e.queue)
	env.e.SetLeading(true)
	if n := env.e.queue.Len(); n != 0 {
		t.Errorf("SetLeading(true) on a leader queued %d clusters", n)
	}
	if !env.e.Leading() {
		t.Error("Leading() = false for an engine that was never a follower")
	}
}

// Stopping the engine while a group of copies is being written lets the
// group finish: the write in flight is not cancelled, and no other cluster
// is started.
func TestRunDrainsInFlightWrites(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	entered := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})
	down.kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil, nil
	})
	env := newEnv(t, down, srcSecret("db", "7"), srcSecret("api", "8"))
	env.e.cfg.Workers = 1
	// Cluster c2 shares the fake client: if the engine started it after
	// the stop, its create would show in the actions.
	rows := []*courier.DownstreamCopy{
		rowFor("app", "c1", "Secret", "db", "7", courier.CopyPhasePending),
		rowFor("app", "c1", "Secret", "api", "8", courier.CopyPhasePending),
	}
	env.setDesired(append(rows, rowFor("app", "c2", "Secret", "db", "7", courier.CopyPhasePending))...)
	drain(env.e.queue)
	env.e.queue.Add(clusterKey)
	env.e.queue.Add(fleetNS + "/c2") // waits for the only worker

	ctx, stop := context.WithCancel(env.ctx)
	done := make(chan struct{})
	go func() { env.e.Run(ctx); close(done) }()
	<-entered
	stop()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Run returned while a write was in flight")
	default:
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the write finished")
	}
	creates := 0
	for _, a := range down.kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "secrets" {
			creates++
		}
	}
	// Both copies of the group were written (the group is whole), and
	// nothing for another cluster.
	if creates != 2 {
		t.Errorf("creates after the stop = %d, want 2 (the whole group, nothing more)", creates)
	}
	for _, r := range rows {
		if got := env.mustStatus(r).Phase; got != courier.CopyPhaseSynced {
			t.Errorf("%s: phase %s, want Synced", r.Name, got)
		}
	}
}
