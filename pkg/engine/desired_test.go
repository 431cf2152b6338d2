package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// SetDesired replaces one HelmOp's part of the desired state and queues
// only the clusters where that HelmOp's copies changed; nothing is queued
// before DesiredComplete, whose first call queues every Cluster. Statuses
// of rows that are gone are dropped, those of other HelmOps' rows kept.
// After every step the indexes kept incrementally (per cluster, wanted-by
// for twins, source counts, row owners) equal the ones rebuilt from
// scratch.
func TestSetDesired(t *testing.T) {
	env := newEnv(t, nil)
	a := func(rv string) *courier.DownstreamCopy { return row("Secret", "a", rv, courier.CopyPhasePending) }
	b2 := func(keep bool) *courier.DownstreamCopy {
		r := rowFor("app", "c2", "Secret", "b", "5", courier.CopyPhasePending)
		r.Spec.KeepResources = keep
		return r
	}
	otherC3 := rowFor("other", "c3", "Secret", "a", "1", courier.CopyPhasePending)
	missing := row("Secret", "a", "", courier.CopyPhaseSourceMissing)
	steps := []struct {
		name       string
		op         types.NamespacedName
		rows       []*courier.DownstreamCopy
		complete   bool // call DesiredComplete instead of SetDesired
		wantQueued []string
		wantRows   []*courier.DownstreamCopy // every desired row afterwards
	}{
		{name: "before DesiredComplete nothing is queued", op: appOp, rows: []*courier.DownstreamCopy{a("1")},
			wantQueued: []string{}, wantRows: []*courier.DownstreamCopy{a("1")}},
		{name: "DesiredComplete queues every Cluster", complete: true,
			wantQueued: []string{"fleet-default/c1", "fleet-default/c2", "fleet-default/c3"}, wantRows: []*courier.DownstreamCopy{a("1")}},
		{name: "DesiredComplete again queues nothing", complete: true,
			wantQueued: []string{}, wantRows: []*courier.DownstreamCopy{a("1")}},
		{name: "same rows again", op: appOp, rows: []*courier.DownstreamCopy{a("1")},
			wantQueued: []string{}, wantRows: []*courier.DownstreamCopy{a("1")}},
		{name: "source resourceVersion changed", op: appOp, rows: []*courier.DownstreamCopy{a("2")},
			wantQueued: []string{"fleet-default/c1"}, wantRows: []*courier.DownstreamCopy{a("2")}},
		{name: "row added for another cluster", op: appOp, rows: []*courier.DownstreamCopy{a("2"), b2(false)},
			wantQueued: []string{"fleet-default/c2"}, wantRows: []*courier.DownstreamCopy{a("2"), b2(false)}},
		{name: "keepResources changed", op: appOp, rows: []*courier.DownstreamCopy{a("2"), b2(true)},
			wantQueued: []string{"fleet-default/c2"}, wantRows: []*courier.DownstreamCopy{a("2"), b2(true)}},
		{name: "another HelmOp's rows queue only its cluster", op: otherOp, rows: []*courier.DownstreamCopy{otherC3},
			wantQueued: []string{"fleet-default/c3"}, wantRows: []*courier.DownstreamCopy{a("2"), b2(true), otherC3}},
		{name: "source went missing", op: appOp, rows: []*courier.DownstreamCopy{missing, b2(true)},
			wantQueued: []string{"fleet-default/c1"}, wantRows: []*courier.DownstreamCopy{missing, b2(true), otherC3}},
		{name: "order does not matter", op: appOp, rows: []*courier.DownstreamCopy{b2(true), missing},
			wantQueued: []string{}, wantRows: []*courier.DownstreamCopy{missing, b2(true), otherC3}},
		{name: "all rows of a cluster removed", op: appOp, rows: []*courier.DownstreamCopy{b2(true)},
			wantQueued: []string{"fleet-default/c1"}, wantRows: []*courier.DownstreamCopy{b2(true), otherC3}},
		{name: "HelmOp gone", op: appOp,
			wantQueued: []string{"fleet-default/c2"}, wantRows: []*courier.DownstreamCopy{otherC3}},
	}
	for _, s := range steps {
		// Statuses as if every row had been reconciled.
		for _, r := range []*courier.DownstreamCopy{a("1"), b2(false), otherC3} {
			env.e.record(keyOf(r), copycontract.Status{Phase: courier.CopyPhaseSynced, Message: s.name})
		}
		if s.complete {
			env.e.DesiredComplete()
		} else {
			env.e.SetDesired(s.op, s.rows)
		}
		if got := drain(env.e.queue); !slices.Equal(got, s.wantQueued) {
			t.Errorf("%s: queued %q, want %q", s.name, got, s.wantQueued)
		}
		want := map[string]bool{}
		for _, r := range s.wantRows {
			want[keyOf(r)] = true
		}
		env.e.statuses.mu.Lock()
		for k := range env.e.statuses.statuses {
			if !want[k] {
				t.Errorf("%s: status of vanished row %s kept", s.name, k)
			}
		}
		if got := slices.Sorted(maps.Keys(env.e.statuses.rows)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
			t.Errorf("%s: rows that may have a status %q, want %q", s.name, got, slices.Sorted(maps.Keys(want)))
		}
		env.e.statuses.mu.Unlock()
		checkDesiredIndexes(t, s.name, env.e)
	}
	if _, ok := env.e.Status(keyOf(otherC3)); !ok {
		t.Error("status of another HelmOp's row, still desired, was dropped")
	}
	if _, ok := env.e.Status(keyOf(a("1"))); ok {
		t.Error("status of a removed row is still reported")
	}
	// A status recorded for a row that is no longer desired (its HelmOp
	// changed during a pass) is dropped, and nobody is told.
	if env.e.record(keyOf(a("1")), copycontract.Status{Phase: courier.CopyPhaseSynced}) {
		t.Error("record kept a status for a row nobody wants")
	}
}

// checkDesiredIndexes compares the indexes SetDesired keeps incrementally
// with the ones rebuilt from every HelmOp's copies.
func checkDesiredIndexes(t *testing.T, step string, e *Engine) {
	t.Helper()
	e.statuses.mu.Lock()
	accepted := maps.Clone(e.statuses.rows)
	e.statuses.mu.Unlock()
	e.desired.mu.Lock()
	defer e.desired.mu.Unlock()
	byCluster := map[string][]string{}
	wantedBy := map[string][]string{}
	sources := map[sourceKey]int{}
	for op, clusters := range e.desired.byOp {
		for key, copies := range clusters {
			byCluster[key] = append(byCluster[key], op.String())
			for _, c := range copies {
				id := copyID(c.helmOp, c.kind, c.targetNS, c.name)
				wantedBy[id] = append(wantedBy[id], key)
				if c.copyable {
					sources[sourceKey{c.kind, c.helmOp.Namespace, c.name}]++
				}
				if accepted[c.rowKey] != op {
					t.Errorf("%s: row %s belongs to %v, want %v", step, c.rowKey, accepted[c.rowKey], op)
				}
			}
		}
	}
	gotByCluster := map[string][]string{}
	for key, ops := range e.desired.byCluster {
		for op := range ops {
			gotByCluster[key] = append(gotByCluster[key], op.String())
		}
	}
	gotWantedBy := map[string][]string{}
	for id, keys := range e.desired.wantedBy {
		gotWantedBy[id] = slices.Clone(keys)
	}
	for _, m := range []map[string][]string{byCluster, wantedBy, gotByCluster, gotWantedBy} {
		for _, v := range m {
			sort.Strings(v)
		}
	}
	if fmt.Sprint(gotByCluster) != fmt.Sprint(byCluster) {
		t.Errorf("%s: HelmOps by cluster %v, rebuilt %v", step, gotByCluster, byCluster)
	}
	if fmt.Sprint(gotWantedBy) != fmt.Sprint(wantedBy) {
		t.Errorf("%s: wantedBy %v, rebuilt %v", step, gotWantedBy, wantedBy)
	}
	if !maps.Equal(e.desired.sources, sources) {
		t.Errorf("%s: source counts %v, rebuilt %v", step, e.desired.sources, sources)
	}
}

// Whether a row is copied comes from its spec, never from its status: a
// row whose status says Pending but whose source does not exist is not
// copied, and a row whose status says anything else but whose spec is
// complete is.
func TestCopyableFromSpec(t *testing.T) {
	cases := []struct {
		name string
		row  *courier.DownstreamCopy
		want bool
	}{
		{"complete spec", row("Secret", "db", "7", courier.CopyPhasePending), true},
		{"complete spec, any status", row("Secret", "db", "7", courier.CopyPhaseConflict), true},
		{"ConfigMap, kind in lower case", row("configmap", "settings", "7", ""), true},
		{"no source resourceVersion: missing", row("Secret", "db", "", courier.CopyPhasePending), false},
		{"unsupported kind", row("Pod", "p", "7", courier.CopyPhasePending), false},
		{"no name", row("Secret", "", "7", courier.CopyPhasePending), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			copies := desiredCopies(appOp, []*courier.DownstreamCopy{tc.row})[clusterKey]
			if len(copies) != 1 || copies[0].copyable != tc.want {
				t.Errorf("copies %+v, want one with copyable=%v", copies, tc.want)
			}
		})
	}
}

// A cluster queued before DesiredComplete (by a downstream event, say) is
// not reconciled: its sweep would remove the copies of HelmOps the view
// has not handed over yet. DesiredComplete queues it again.
func TestNoPassBeforeDesiredComplete(t *testing.T) {
	down := newFakeCluster(true, targetNamespace, secretCopy(srcSecret("old", "7"), targetNS, owner(otherOp, "c1")))
	env := newEnv(t, down, srcSecret("db", "7"))
	env.e.SetDesired(appOp, []*courier.DownstreamCopy{row("Secret", "db", "7", courier.CopyPhasePending)})
	env.e.queue.Add(clusterKey)
	if !env.e.processNext(env.ctx) {
		t.Fatal("processNext stopped")
	}
	if env.ds.gets != 0 || len(down.kube.Actions()) != 0 {
		t.Fatalf("a pass ran before DesiredComplete: %d clients, requests %q", env.ds.gets, env.downActions())
	}
	// Positive control: once the view has handed over every HelmOp (the
	// other HelmOp has no rows), the same cluster is reconciled.
	env.e.DesiredComplete()
	drain(env.e.queue)
	env.e.queue.Add(clusterKey)
	env.e.processNext(env.ctx)
	if env.ds.gets != 1 {
		t.Fatalf("DesiredComplete then a queued cluster: %d passes, want 1", env.ds.gets)
	}
	if _, ok := down.secret(targetNS, "old"); ok {
		t.Error("the other HelmOp's copy, wanted by nobody, was not swept")
	}
}

// The engine tells the view what changed, by HelmOp: the rows whose status
// changed and whether its leftover copies changed. Nothing is told when
// nothing changed.
func TestNotifyByHelmOp(t *testing.T) {
	env := newEnv(t, nil)
	a1, o1 := row("Secret", "a", "1", courier.CopyPhasePending), rowFor("other", "c1", "Secret", "a", "1", courier.CopyPhasePending)
	a2 := row("Secret", "b", "1", courier.CopyPhasePending)
	env.setDesired(a1, a2, o1)
	leftover := func(op types.NamespacedName, name string) copycontract.Leftover {
		return copycontract.Leftover{HelmOp: op, Cluster: "c1", Kind: "Secret", Name: name, TargetNamespace: targetNS, Phase: courier.CopyPhaseDeleting}
	}
	gone := types.NamespacedName{Namespace: fleetNS, Name: "gone"}
	steps := []struct {
		name   string
		change func()
		want   []string // one line per StatusChange
	}{
		{name: "a status", change: func() {
			env.e.record(keyOf(a1), copycontract.Status{Phase: courier.CopyPhaseSynced})
			env.e.record(keyOf(a2), copycontract.Status{Phase: courier.CopyPhaseConflict})
		}, want: []string{fmt.Sprintf("fleet-default/app rows [%s %s] leftovers false", keyOf(a1), keyOf(a2))}},
		{name: "the same status again", change: func() {
			env.e.record(keyOf(a1), copycontract.Status{Phase: courier.CopyPhaseSynced})
		}},
		{name: "leftovers of a HelmOp that is gone and of another", change: func() {
			env.e.statuses.setLeftovers(clusterKey, []copycontract.Leftover{leftover(gone, "x"), leftover(otherOp, "y")})
		}, want: []string{"fleet-default/gone rows [] leftovers true", "fleet-default/other rows [] leftovers true"}},
		{name: "the same leftovers, in another order", change: func() {
			env.e.statuses.setLeftovers(clusterKey, []copycontract.Leftover{leftover(otherOp, "y"), leftover(gone, "x")})
		}},
		{name: "one HelmOp's leftovers removed", change: func() {
			env.e.statuses.setLeftovers(clusterKey, []copycontract.Leftover{leftover(otherOp, "y")})
		}, want: []string{"fleet-default/gone rows [] leftovers true"}},
		{name: "the cluster forgotten", change: func() { env.e.statuses.setLeftovers(clusterKey, nil) },
			want: []string{"fleet-default/other rows [] leftovers true"}},
	}
	for _, s := range steps {
		env.changes = nil
		s.change()
		env.e.notify()
		var got []string
		for _, ch := range env.changes {
			got = append(got, fmt.Sprintf("%s rows %v leftovers %v", ch.HelmOp, ch.Rows, ch.Leftovers))
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: told %q, want %q", s.name, got, s.want)
		}
	}
	if left := env.e.Leftovers(gone); len(left) != 0 {
		t.Errorf("leftovers of a HelmOp no cluster has any for: %+v", left)
	}
}

// A source no desired copy needs any more leaves the source cache; one
// that another HelmOp still copies stays.
func TestSourcesForgottenPerHelmOp(t *testing.T) {
	env := newEnv(t, nil, srcSecret("db", "7"))
	db := sourceKey{"Secret", fleetNS, "db"}
	env.setDesired(row("Secret", "db", "7", courier.CopyPhasePending), rowFor("other", "c2", "Secret", "db", "7", courier.CopyPhasePending))
	if _, err := env.e.sources.get(context.Background(), db, "7", ""); err != nil {
		t.Fatal(err)
	}
	cached := func() bool {
		env.e.sources.mu.Lock()
		defer env.e.sources.mu.Unlock()
		_, ok := env.e.sources.objects[db]
		return ok
	}
	env.e.SetDesired(appOp, nil)
	if !cached() {
		t.Error("a source another HelmOp still copies was dropped")
	}
	env.e.SetDesired(otherOp, nil)
	if cached() {
		t.Error("a source nobody copies any more is still cached")
	}
}
