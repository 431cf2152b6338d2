package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
)

// A new copy is created without a GET when the informers can answer for
// it (createUnread), and read first whenever they cannot. An object found
// there after all is judged exactly as a read would have: never written
// unless it is Courier's own.
func TestCreateWithoutRead(t *testing.T) {
	db := srcSecret("db", "7")
	cases := []struct {
		name string
		// existing objects in the cluster (only Courier's own copies for
		// c1 are in its informer).
		existing []runtime.Object
		synced   bool
		// foreignWatched: the client watches Fleet's copies; fleet names
		// the ones it holds.
		foreignWatched bool
		fleet          []string
		follower       bool
		// firstPass: the row's pass is the first with this client (after a
		// start); otherwise a pass with no rows ends before it.
		firstPass bool
		wantDown  []string
		wantPhase courier.CopyPhase
		// wantUntouched: the existing Secret apps/db keeps its data.
		wantUntouched bool
	}{
		{
			name: "nothing there: one create, no read", synced: true, foreignWatched: true,
			existing:  []runtime.Object{targetNamespace},
			wantDown:  []string{saLookup, "create namespaces apps", "create secrets apps/db"},
			wantPhase: courier.CopyPhaseSynced,
		},
		{
			name: "positive control, informers not synced: read first", foreignWatched: true,
			existing:  []runtime.Object{targetNamespace},
			wantDown:  []string{"get secrets apps/db", saLookup, "create namespaces apps", "create secrets apps/db", "list secrets " + c1Selector, "list configmaps " + c1Selector},
			wantPhase: courier.CopyPhaseSynced,
		},
		{
			name: "no foreign watch: read first", synced: true,
			existing:  []runtime.Object{targetNamespace},
			wantDown:  []string{"get secrets apps/db", saLookup, "create namespaces apps", "create secrets apps/db"},
			wantPhase: courier.CopyPhaseSynced,
		},
		{
			name: "Fleet's copy of that name: read, never written", synced: true, foreignWatched: true, fleet: []string{"apps/db"},
			existing:  []runtime.Object{targetNamespace, fleetsSecret()},
			wantDown:  []string{"get secrets apps/db"},
			wantPhase: courier.CopyPhaseConflict, wantUntouched: true,
		},
		{
			name: "an object Courier does not own, unknown to the informers: the create is refused, then it is read", synced: true, foreignWatched: true,
			existing:  []runtime.Object{targetNamespace, unmanagedSecret(targetNS, "db")},
			wantDown:  []string{saLookup, "create namespaces apps", "create secrets apps/db", "get secrets apps/db"},
			wantPhase: courier.CopyPhaseConflict, wantUntouched: true,
		},
		{
			name: "the first pass after a start reads: it cannot know what it found in Conflict before", synced: true, foreignWatched: true, firstPass: true,
			existing:  []runtime.Object{targetNamespace, unmanagedSecret(targetNS, "db")},
			wantDown:  []string{"get secrets apps/db"},
			wantPhase: courier.CopyPhaseConflict, wantUntouched: true,
		},
		{
			name: "a follower writes nothing, so it reads", synced: true, foreignWatched: true, follower: true,
			existing:  []runtime.Object{targetNamespace},
			wantDown:  []string{"get secrets apps/db"},
			wantPhase: courier.CopyPhasePending,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			down := newFakeCluster(tc.synced, tc.existing...)
			down.foreignWatched = tc.foreignWatched
			down.foreign = map[string]bool{}
			for _, n := range tc.fleet {
				down.foreign[n] = true
			}
			env := newEnv(t, down, db)
			if tc.follower {
				env.e.SetLeading(false)
			}
			if !tc.firstPass {
				_ = env.reconcile()
				down.kube.ClearActions()
			}
			before, _ := down.secret(targetNS, "db")
			r := rowOf(db)
			_ = env.reconcile(r)

			checkActions(t, "downstream", env.downActions(), tc.wantDown)
			if got := env.mustStatus(r).Phase; got != tc.wantPhase {
				t.Errorf("phase %s, want %s (%s)", got, tc.wantPhase, env.mustStatus(r).Message)
			}
			after, ok := down.secret(targetNS, "db")
			switch {
			case tc.wantUntouched && (!ok || string(after.Data["password"]) != string(before.Data["password"]) || after.Labels[copyspec.LabelOwner] != ""):
				t.Errorf("the object Courier does not own was changed: %v", after)
			case tc.wantPhase == courier.CopyPhaseSynced && (!ok || after.Labels[copyspec.LabelOwner] != appOwnerHash):
				t.Errorf("the copy was not written: %v", after)
			}
		})
	}
}

// Once a pass found an object Courier does not own, the next pass reads
// it again instead of trying a create that can only be refused: a Conflict
// costs one GET per pass, as before.
func TestConflictIsReadNotRecreated(t *testing.T) {
	db := srcSecret("db", "7")
	down := newFakeCluster(true, targetNamespace, unmanagedSecret(targetNS, "db"))
	down.foreignWatched = true
	env := newEnv(t, down, db)
	_ = env.reconcile() // a pass ends: the next may create without a read
	r := rowOf(db)
	_ = env.reconcile(r)
	if got := env.mustStatus(r).Phase; got != courier.CopyPhaseConflict {
		t.Fatalf("first pass: phase %s, want Conflict", got)
	}
	down.kube.ClearActions()
	_ = env.reconcile(r)
	checkActions(t, "downstream, second pass", env.downActions(), []string{"get secrets apps/db"})
}

// A twin Cluster on the same kube-apiserver that wants the same copy may
// have written it: the copy is read, not created blindly.
func TestTwinCopyIsRead(t *testing.T) {
	db := srcSecret("db", "7")
	down := newFakeCluster(true, targetNamespace)
	down.foreignWatched = true
	env := newEnv(t, down, db)
	twin := rowFor(appOp.Name, "c2", "Secret", "db", "7", courier.CopyPhasePending)
	_ = env.reconcile() // a pass ends: the next may create without a read
	down.kube.ClearActions()
	env.e.clients.setServer(c2Key, env.ds.client) // c2 reaches the same server
	_ = env.reconcile(rowOf(db), twin)
	actions := env.downActions()
	if len(actions) == 0 || actions[0] != "get secrets apps/db" {
		t.Errorf("downstream requests %q: want a read of apps/db first", actions)
	}
}

// fleetsSecret is Fleet's own copy of db (docs/design.md#fleets-own-copies), with other
// data.
func fleetsSecret() *corev1.Secret {
	s := unmanagedSecret(targetNS, "db")
	s.Labels = map[string]string{copyspec.FleetCopyLabel: "app-c1"}
	return s
}

// Whether a copy is created without a read is decided from the row's spec
// and what was observed downstream, never from the row's recorded status:
// a name found held by an object Courier does not own is read again
// whatever the row's status says since, until a read finds it free.
func TestCreateUnreadDecidedFromObservedObject(t *testing.T) {
	db := srcSecret("db", "7")
	r := rowOf(db)
	cases := []struct {
		name string
		// between runs after a pass found apps/db held by an object
		// Courier does not own, before the next pass.
		between   func(env *testEnv, down *fakeCluster)
		wantFirst string
		wantPhase courier.CopyPhase
		wantTaken bool
	}{
		{name: "nothing changed: read again", between: func(*testEnv, *fakeCluster) {},
			wantFirst: "get secrets apps/db", wantPhase: courier.CopyPhaseConflict, wantTaken: true},
		{name: "the row's status overwritten since (the cluster was unreachable): still read",
			between: func(env *testEnv, _ *fakeCluster) {
				env.e.record(keyOf(r), copycontract.Status{Phase: courier.CopyPhaseUnreachable, Message: "down"})
			},
			wantFirst: "get secrets apps/db", wantPhase: courier.CopyPhaseConflict, wantTaken: true},
		{name: "the row's status forgotten: still read",
			between:   func(env *testEnv, _ *fakeCluster) { env.e.statuses.forget([]string{keyOf(r)}) },
			wantFirst: "get secrets apps/db", wantPhase: courier.CopyPhaseConflict, wantTaken: true},
		{name: "positive control: the object removed, a read finds the name free and the copy is written",
			between: func(_ *testEnv, down *fakeCluster) {
				_ = down.kube.Tracker().Delete(secretsGVR, targetNS, "db")
			},
			wantFirst: "get secrets apps/db", wantPhase: courier.CopyPhaseSynced, wantTaken: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			down := newFakeCluster(true, targetNamespace, unmanagedSecret(targetNS, "db"))
			down.foreignWatched = true
			env := newEnv(t, down, db)
			_ = env.reconcile() // a pass ends: the next may create without a read
			_ = env.reconcile(r)
			if got := env.mustStatus(r).Phase; got != courier.CopyPhaseConflict {
				t.Fatalf("first pass: phase %s, want Conflict", got)
			}
			tc.between(env, down)
			down.kube.ClearActions()
			_ = env.reconcile(r)
			if got := env.downActions(); len(got) == 0 || got[0] != tc.wantFirst {
				t.Errorf("downstream requests %q, want %q first", got, tc.wantFirst)
			}
			if got := env.mustStatus(r).Phase; got != tc.wantPhase {
				t.Errorf("phase %s, want %s", got, tc.wantPhase)
			}
			if got := env.e.taken.taken(clusterKey, dc2(r)); got != tc.wantTaken {
				t.Errorf("name recorded taken: %t, want %t", got, tc.wantTaken)
			}
		})
	}
}

// Another HelmOp's copy of the same name in the Cluster's informer holds
// the name: the row is read, not created into an AlreadyExists.
func TestCreateUnreadNotOverCachedObject(t *testing.T) {
	db := srcSecret("db", "7")
	down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(otherOp, "c1")))
	down.foreignWatched = true
	env := newEnv(t, down, db)
	other := rowFor(otherOp.Name, "c1", "Secret", "db", "7", courier.CopyPhasePending)
	_ = env.reconcile(other) // a pass ends: the next may create without a read
	down.kube.ClearActions()
	r := rowOf(db)
	_ = env.reconcile(r, other)
	checkActions(t, "downstream", env.downActions(), []string{"get secrets apps/db"})
	if got := env.mustStatus(r).Phase; got != courier.CopyPhaseConflict {
		t.Errorf("phase %s, want Conflict", got)
	}
}

// dc2 is the desired copy of row r as the engine holds it.
func dc2(r *courier.DownstreamCopy) desiredCopy {
	for _, copies := range desiredCopies(appOp, []*courier.DownstreamCopy{r}) {
		return copies[0]
	}
	return desiredCopy{}
}
