package copyview

import (
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/memstore"
)

var (
	appOp   = types.NamespacedName{Namespace: "fleet-default", Name: "app"}
	webOp   = types.NamespacedName{Namespace: "fleet-default", Name: "web"}
	idleOp  = types.NamespacedName{Namespace: "fleet-default", Name: "idle"}
	farOp   = types.NamespacedName{Namespace: "other", Name: "far"}
	goneOp  = types.NamespacedName{Namespace: "fleet-default", Name: "gone"}
	listing = func(entries ...string) fleet.BundleDeploymentOptions {
		var res []fleet.DownstreamResource
		for _, e := range entries {
			kind, name, _ := strings.Cut(e, "/")
			res = append(res, fleet.DownstreamResource{Kind: kind, Name: name})
		}
		return fleet.BundleDeploymentOptions{TargetNamespace: "apps", DownstreamResources: res}
	}
)

// inNamespace moves a fixture object to another namespace.
func inNamespace[T metav1.Object](ns string, o T) T {
	o.SetNamespace(ns)
	return o
}

// workspaces is two Fleet workspaces: in fleet-default, app lists the
// Secret creds at its root, web the ConfigMap settings in a target, idle
// nothing, on Clusters c1 and c2; in other, far lists a Secret also named
// creds, on Cluster c9.
func workspaces() []any {
	return []any{
		helmOp("app", listing("Secret/creds")),
		helmOp("web", fleet.BundleDeploymentOptions{TargetNamespace: "apps"},
			fleet.BundleTarget{ClusterGroup: "default", BundleDeploymentOptions: listing("ConfigMap/settings")}),
		helmOp("idle", fleet.BundleDeploymentOptions{}),
		inNamespace("other", helmOp("far", listing("secret/creds"))),
		cluster("c1", map[string]string{"env": "dev"}), cluster("c2", nil), defaultGroup,
		inNamespace("other", cluster("c9", nil)), inNamespace("other", defaultGroup.DeepCopy()),
		source("Secret", "creds", "1"), source("ConfigMap", "settings", "2"),
		inNamespace("other", source("Secret", "creds", "3")),
	}
}

// withRV returns a copy of a source with another resourceVersion.
func withRV(o *metav1.PartialObjectMetadata, rv string) *metav1.PartialObjectMetadata {
	o = o.DeepCopy()
	o.ResourceVersion = rv
	return o
}

// An event queues only the HelmOps it can affect: each case says which
// HelmOps were recomputed (handed to the engine) after it. The cases that
// queue nothing have a case beside them, through the same handler, that
// does queue: the positive control.
func TestEventsQueueOnlyTheHelmOpsTheyAffect(t *testing.T) {
	creds := source("Secret", "creds", "1")
	c1 := cluster("c1", map[string]string{"env": "dev"})
	app := helmOp("app", listing("Secret/creds"))
	group := defaultGroup
	cases := []struct {
		name  string
		event func(f *fixture)
		want  []string
	}{
		{name: "a Secret no HelmOp lists", event: func(f *fixture) { f.add(source("Secret", "unrelated", "5")) }},
		// A new version of an existing source: only the rows naming it,
		// handed to the engine as they are (UpdateDesired).
		{name: "a listed Secret changed", event: func(f *fixture) { f.update(creds, withRV(creds, "5")) },
			want: []string{"update fleet-default/app 2"}},
		{name: "a listed Secret resynced, same resourceVersion", event: func(f *fixture) { f.update(creds, creds.DeepCopy()) }},
		{name: "a listed Secret deleted", event: func(f *fixture) { f.remove(creds) },
			want: []string{"set fleet-default/app 2"}},
		{name: "a listed Secret deleted, seen as a tombstone", event: func(f *fixture) {
			f.remove(cache.DeletedFinalStateUnknown{Key: "fleet-default/creds", Obj: creds})
		}, want: []string{"set fleet-default/app 2"}},
		{name: "a ConfigMap listed in a target", event: func(f *fixture) { f.add(source("ConfigMap", "settings", "6")) },
			want: []string{"set fleet-default/web 2"}},
		{name: "a ConfigMap named like a listed Secret", event: func(f *fixture) { f.add(source("ConfigMap", "creds", "6")) }},
		{name: "a Secret of the same name in another workspace", event: func(f *fixture) {
			old := inNamespace("other", source("Secret", "creds", "3"))
			f.update(old, withRV(old, "7"))
		}, want: []string{"update other/far 1"}},
		{name: "a Cluster's labels changed: its workspace's HelmOps", event: func(f *fixture) {
			n := c1.DeepCopy()
			n.Labels["env"] = "prod"
			f.update(c1, n)
		}, want: []string{"set fleet-default/app 2", "set fleet-default/idle 0", "set fleet-default/web 2"}},
		{name: "a Cluster changed, labels the same", event: func(f *fixture) {
			n := c1.DeepCopy()
			n.Spec.KubeConfigSecret = "new"
			f.update(c1, n)
		}},
		{name: "a Cluster added in another workspace", event: func(f *fixture) { f.add(inNamespace("other", cluster("c8", nil))) },
			want: []string{"set other/far 2"}},
		{name: "a Cluster deleted, seen as a tombstone", event: func(f *fixture) {
			f.remove(cache.DeletedFinalStateUnknown{Key: "fleet-default/c1", Obj: c1})
		}, want: []string{"set fleet-default/app 1", "set fleet-default/idle 0", "set fleet-default/web 1"}},
		{name: "a ClusterGroup's selector changed", event: func(f *fixture) {
			n := group.DeepCopy()
			n.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
			f.update(group, n)
		}, want: []string{"set fleet-default/app 1", "set fleet-default/idle 0", "set fleet-default/web 1"}},
		{name: "a ClusterGroup resynced", event: func(f *fixture) { f.update(group, group.DeepCopy()) }},
		{name: "a HelmOp's spec changed: itself", event: func(f *fixture) {
			n := app.DeepCopy()
			n.Spec.DownstreamResources = append(n.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "Secret", Name: "more"})
			f.update(app, n)
		}, want: []string{"set fleet-default/app 4"}},
		{name: "a HelmOp changed, spec the same", event: func(f *fixture) {
			n := app.DeepCopy()
			n.Labels = map[string]string{"status": "updated"}
			f.update(app, n)
		}},
		{name: "a HelmOp deleted: itself, with no rows", event: func(f *fixture) { f.remove(app) },
			want: []string{"set fleet-default/app 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, workspaces()...)
			f.engine.takeCalls()
			tc.event(f)
			f.drain()
			want := tc.want
			if want == nil {
				want = []string{}
			}
			if got := f.engine.takeCalls(); !slices.Equal(got, want) {
				t.Errorf("recomputed %q, want %q", got, want)
			}
		})
	}
}

// A sync writes only the rows that changed: a listed Secret's new
// resourceVersion writes the two rows that name it, and a sync of a
// HelmOp whose rows did not change writes nothing.
func TestSyncWritesOnlyWhatChanged(t *testing.T) {
	f := newFixture(t, workspaces()...)
	w := f.watch()
	creds := source("Secret", "creds", "1")
	before := f.rv()
	f.update(creds, withRV(creds, "5"))
	f.drain()
	if got := f.rv() - before; got != 2 {
		t.Errorf("a listed Secret's change wrote %d rows, want 2", got)
	}
	if got := nextEvents(w); !slices.Equal(got, []string{"MODIFIED app.c1.secret.creds Pending", "MODIFIED app.c2.secret.creds Pending"}) {
		t.Errorf("events %q", got)
	}
	if rv := f.row("app.c1.secret.creds").Spec.Source.ResourceVersion; rv != "5" {
		t.Errorf("row names source resourceVersion %q, want 5", rv)
	}

	before = f.rv()
	f.c.enqueue(appOp)
	f.c.enqueue(webOp)
	f.drain()
	if got := f.rv() - before; got != 0 {
		t.Errorf("syncs that changed nothing wrote %d rows", got)
	}
	if got := f.engine.takeCalls(); !slices.Contains(got, "set fleet-default/web 2") {
		t.Errorf("web was not synced (calls %q): the check above proves nothing", got)
	}
}

// Rows go with their Cluster and with their HelmOp; other rows stay.
func TestDeletionsRemoveRows(t *testing.T) {
	f := newFixture(t, workspaces()...)
	names := func() []string { return slices.Sorted(maps.Keys(f.rows())) }
	if got, want := names(), []string{"app.c1.secret.creds", "app.c2.secret.creds", "far.c9.secret.creds", "web.c1.configmap.settings", "web.c2.configmap.settings"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	f.remove(cluster("c2", nil))
	f.drain()
	if got, want := names(), []string{"app.c1.secret.creds", "far.c9.secret.creds", "web.c1.configmap.settings"}; !slices.Equal(got, want) {
		t.Errorf("after Cluster c2 was deleted: rows %q, want %q", got, want)
	}
	f.remove(helmOp("app", listing("Secret/creds")))
	f.drain()
	if got, want := names(), []string{"far.c9.secret.creds", "web.c1.configmap.settings"}; !slices.Equal(got, want) {
		t.Errorf("after HelmOp app was deleted: rows %q, want %q", got, want)
	}
}

// A status the engine records updates that one row: one write, one watch
// event, no recompute. A status that did not change writes nothing, and a
// key that is not the HelmOp's row is ignored.
func TestStatusChangeUpdatesOneRow(t *testing.T) {
	f := newFixture(t, helmOp("app", listing("Secret/creds", "ConfigMap/settings")),
		cluster("c1", nil), cluster("c2", nil), defaultGroup, source("Secret", "creds", "1"), source("ConfigMap", "settings", "2"))
	f.engine.takeCalls()
	w := f.watch()
	x, y := "fleet-default/app.c1.secret.creds", "fleet-default/app.c2.configmap.settings"
	steps := []struct {
		name      string
		status    map[string]copycontract.Status
		told      []string
		wantRVInc uint64
		want      []string // watch events
	}{
		{name: "one row synced", status: map[string]copycontract.Status{x: {Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "1"}},
			told: []string{x}, wantRVInc: 1, want: []string{"MODIFIED app.c1.secret.creds Synced"}},
		{name: "told again, nothing changed", told: []string{x}},
		{name: "not this HelmOp's row", told: []string{"fleet-default/web.c1.configmap.settings"}},
		{name: "another row, right after", status: map[string]copycontract.Status{y: {Phase: courier.CopyPhaseConflict, Message: "not ours"}},
			told: []string{y}, wantRVInc: 1, want: []string{"MODIFIED app.c2.configmap.settings Conflict"}},
	}
	for _, s := range steps {
		for k, st := range s.status {
			f.engine.setStatus(k, st)
		}
		before := f.rv()
		f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Rows: s.told}})
		f.drain()
		if got := f.rv() - before; got != s.wantRVInc {
			t.Errorf("%s: %d writes, want %d", s.name, got, s.wantRVInc)
		}
		if got := nextEvents(w); !slices.Equal(got, s.want) {
			t.Errorf("%s: events %q, want %q", s.name, got, s.want)
		}
		if calls := f.engine.takeCalls(); len(calls) != 0 {
			t.Errorf("%s: a status change recomputed rows: %q", s.name, calls)
		}
	}
	if r := f.row("app.c1.secret.creds"); r.Status.Message != "copied" || r.Status.SyncedResourceVersion != "1" || r.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("row after its status change: %+v", r.Status)
	}
}

// A row brought up to date from a status change is the row a full sync
// computes: for each engine status, refreshing the row and then syncing
// its whole HelmOp writes nothing more.
func TestStatusRefreshEqualsFullSync(t *testing.T) {
	cases := []struct {
		name   string
		row    string
		status *copycontract.Status
	}{
		{name: "Synced", row: "app.c1.secret.creds", status: &copycontract.Status{Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "1"}},
		{name: "Forbidden", row: "app.c1.secret.creds", status: &copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: "denied"}},
		{name: "status dropped: back to Pending", row: "app.c1.secret.creds"},
		{name: "source missing, copy made earlier", row: "app.c1.secret.absent", status: &copycontract.Status{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "4"}},
		{name: "Invalid rows keep their phase", row: "app.c1.pod.web", status: &copycontract.Status{Phase: courier.CopyPhaseSynced}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, helmOp("app", listing("Secret/creds", "Secret/absent", "Pod/web")),
				cluster("c1", nil), defaultGroup, source("Secret", "creds", "1"))
			key := "fleet-default/" + tc.row
			f.engine.setStatus(key, copycontract.Status{Phase: courier.CopyPhaseConflict, Message: "before"})
			f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Rows: []string{key}}})
			f.drain()
			if tc.status != nil {
				f.engine.setStatus(key, *tc.status)
			} else {
				delete(f.engine.statuses, key)
			}
			f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Rows: []string{key}}})
			f.drain()
			refreshed := f.row(tc.row)
			before := f.rv()
			f.c.enqueue(appOp)
			f.drain()
			if f.rv() != before {
				t.Errorf("a full sync changed the refreshed row:\nrefreshed %+v\nfull sync %+v", refreshed.Status, f.row(tc.row).Status)
			}
			if tc.name == "source missing, copy made earlier" && !strings.Contains(refreshed.Status.Message, "the copy made from resourceVersion 4 stays") {
				t.Errorf("message %q does not say the copy stays", refreshed.Status.Message)
			}
		})
	}
}

// The rows of leftover copies follow the engine's leftovers, also for a
// HelmOp that is gone; a wanted row wins over a leftover of its name, and
// a leftover change does not recompute the HelmOp's rows.
func TestLeftoverRows(t *testing.T) {
	f := newFixture(t, helmOp("app", listing("Secret/creds")), cluster("c1", nil), defaultGroup, source("Secret", "creds", "1"))
	f.engine.takeCalls()
	leftover := func(op types.NamespacedName, name, ns string, phase courier.CopyPhase) copycontract.Leftover {
		return copycontract.Leftover{HelmOp: op, Cluster: "c1", Kind: "Secret", Name: name, TargetNamespace: ns, Phase: phase, Message: string(phase)}
	}
	type step struct {
		name      string
		op        types.NamespacedName
		leftovers []copycontract.Leftover
		want      []string // watch events
	}
	w := f.watch()
	for _, s := range []step{
		{name: "a Kept copy, and one where a wanted row is", op: appOp,
			leftovers: []copycontract.Leftover{leftover(appOp, "old", "apps", courier.CopyPhaseKept), leftover(appOp, "creds", "old-ns", courier.CopyPhaseDeleting)},
			want:      []string{"ADDED app.c1.secret.old Kept"}},
		{name: "a HelmOp that is gone", op: goneOp,
			leftovers: []copycontract.Leftover{leftover(goneOp, "creds", "apps", courier.CopyPhaseDeleting)},
			want:      []string{"ADDED gone.c1.secret.creds Deleting"}},
		{name: "its copy removed", op: goneOp, want: []string{"DELETED gone.c1.secret.creds Deleting"}},
		{name: "the Kept copy removed downstream", op: appOp,
			leftovers: []copycontract.Leftover{leftover(appOp, "creds", "old-ns", courier.CopyPhaseDeleting)},
			want:      []string{"DELETED app.c1.secret.old Kept"}},
	} {
		f.engine.setLeftovers(s.op, s.leftovers...)
		f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: s.op, Leftovers: true}})
		f.drain()
		if got := nextEvents(w); !slices.Equal(got, s.want) {
			t.Errorf("%s: events %q, want %q", s.name, got, s.want)
		}
		if calls := f.engine.takeCalls(); len(calls) != 0 {
			t.Errorf("%s: a leftover change recomputed rows: %q", s.name, calls)
		}
	}
	if r := f.row("app.c1.secret.creds"); r.Status.Phase != courier.CopyPhasePending {
		t.Errorf("the wanted row was replaced by a leftover: %s", r.Status.Phase)
	}
	// A full sync keeps the leftover rows it did not change.
	f.engine.setLeftovers(appOp, leftover(appOp, "old", "apps", courier.CopyPhaseKept))
	f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Leftovers: true}})
	f.drain()
	nextEvents(w)
	f.c.enqueue(appOp)
	f.drain()
	if got := nextEvents(w); len(got) != 0 {
		t.Errorf("a full sync rewrote rows: %q", got)
	}
	if calls := f.engine.takeCalls(); !slices.Equal(calls, []string{"set fleet-default/app 1"}) {
		t.Errorf("the full sync was not one (calls %q): the check above proves nothing", calls)
	}
}

// The view is ready, and tells the engine it has every HelmOp, only once
// the first pass synced each HelmOp there was.
func TestReadyAfterFirstPass(t *testing.T) {
	f := &fixture{t: t, caches: newCaches(t, workspaces()...), engine: newFakeEngine(), store: memstore.New[*courier.DownstreamCopy]()}
	_, f.ctx = ktesting.NewTestContext(t)
	f.c = newController(f.caches.inputs(), f.store, f.engine, f.caches.helmOps)
	if err := f.c.queueAll(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		f.c.processNext(f.ctx)
		if f.c.Ready() {
			t.Fatalf("ready after %d of 4 HelmOps", i+1)
		}
	}
	f.c.processNext(f.ctx)
	if !f.c.Ready() {
		t.Fatal("not ready after every HelmOp was synced")
	}
	calls := f.engine.calls
	if len(calls) != 5 || calls[4] != "complete" {
		t.Errorf("engine calls %q, want four HelmOps then complete", calls)
	}
	f.c.enqueue(appOp)
	f.drain()
	if n := strings.Count(strings.Join(f.engine.calls, ","), "complete"); n != 1 {
		t.Errorf("DesiredComplete called %d times, want once", n)
	}
}

// A status change's work can be taken by a sync that starts between its
// record and its Add; the key then comes round again with nothing
// recorded, and that costs nothing: no recompute, no write.
func TestKeyQueuedAfterItsWorkWasTaken(t *testing.T) {
	f := newFixture(t, helmOp("app", listing("Secret/creds")), cluster("c1", nil), defaultGroup, source("Secret", "creds", "1"))
	f.engine.takeCalls()
	x := "fleet-default/app.c1.secret.creds"
	f.engine.setStatus(x, copycontract.Status{Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "1"})

	// Positive control: told of the change, the view writes the row once
	// and recomputes nothing.
	before := f.rv()
	f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Rows: []string{x}}})
	f.drain()
	if got := f.rv() - before; got != 1 {
		t.Fatalf("the status change wrote %d rows, want 1", got)
	}

	// The race: a sync took the work of a second change before its key
	// was added; the key is processed with nothing recorded.
	f.engine.setStatus(x, copycontract.Status{Phase: courier.CopyPhaseSynced, Message: "copied again", SyncedResourceVersion: "1"})
	f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Rows: []string{x}}})
	f.c.refreshRows(appOp, f.c.takeWork(appOp).rows) // the sync that came first
	before = f.rv()
	f.drain()
	if got := f.rv() - before; got != 0 {
		t.Errorf("processing the key with its work gone wrote %d rows, want 0", got)
	}
	if calls := f.engine.takeCalls(); len(calls) != 0 {
		t.Errorf("processing the key with its work gone recomputed the HelmOp: %q", calls)
	}
	if r := f.row("app.c1.secret.creds"); r.Status.Message != "copied again" {
		t.Errorf("row message %q, want the second change's", r.Status.Message)
	}
}
