package engine

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// The status record alone: which rows may have a status, what is kept,
// and what the next notification tells.
func TestStatusRecord(t *testing.T) {
	clock := func() time.Time { return fixedNow }
	synced := copycontract.Status{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7"}
	conflictSt := copycontract.Status{Phase: courier.CopyPhaseConflict, Message: "not ours"}
	type op func(r *statusRecord) (accepted, changed bool)
	accept := func(helmOp types.NamespacedName, keys ...string) op {
		return func(r *statusRecord) (bool, bool) { r.accept(helmOp, keys); return true, false }
	}
	record := func(key string, s copycontract.Status) op {
		return func(r *statusRecord) (bool, bool) { return r.record(key, s, clock) }
	}
	drop := func(keys ...string) op {
		return func(r *statusRecord) (bool, bool) { r.drop(keys); return true, false }
	}
	forget := func(keys ...string) op {
		return func(r *statusRecord) (bool, bool) { return true, r.forget(keys) }
	}
	cases := []struct {
		name         string
		ops          []op
		wantAccepted bool // of the last op
		wantChanged  bool // of the last op
		wantStatus   map[string]copycontract.Status
		wantChanges  []copycontract.StatusChange
	}{
		{name: "a row not accepted gets no status", ops: []op{record("ns/r1", synced)},
			wantStatus: map[string]copycontract.Status{}},
		{name: "an accepted row's first status, with the time it was first confirmed",
			ops: []op{accept(appOp, "ns/r1"), record("ns/r1", synced)}, wantAccepted: true, wantChanged: true,
			wantStatus:  map[string]copycontract.Status{"ns/r1": {Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7", LastSyncTime: nowTime(fixedNow)}},
			wantChanges: []copycontract.StatusChange{{HelmOp: appOp, Rows: []string{"ns/r1"}}}},
		{name: "the same status again changes nothing",
			ops: []op{accept(appOp, "ns/r1"), record("ns/r1", synced), record("ns/r1", synced)}, wantAccepted: true,
			wantStatus:  map[string]copycontract.Status{"ns/r1": {Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7", LastSyncTime: nowTime(fixedNow)}},
			wantChanges: []copycontract.StatusChange{{HelmOp: appOp, Rows: []string{"ns/r1"}}}},
		{name: "a new phase keeps the last sync time",
			ops: []op{accept(appOp, "ns/r1"), record("ns/r1", synced), record("ns/r1", conflictSt)}, wantAccepted: true, wantChanged: true,
			wantStatus:  map[string]copycontract.Status{"ns/r1": {Phase: courier.CopyPhaseConflict, Message: "not ours", LastSyncTime: nowTime(fixedNow)}},
			wantChanges: []copycontract.StatusChange{{HelmOp: appOp, Rows: []string{"ns/r1"}}}},
		{name: "a dropped row loses its status, untold, and takes none",
			ops:        []op{accept(appOp, "ns/r1"), record("ns/r1", conflictSt), drop("ns/r1"), func(r *statusRecord) (bool, bool) { r.takeChanges(); return r.record("ns/r1", synced, clock) }},
			wantStatus: map[string]copycontract.Status{}},
		{name: "forgetting a row's status is told, and it may have one again",
			ops: []op{accept(appOp, "ns/r1"), accept(otherOp, "ns/o1"), record("ns/r1", conflictSt), record("ns/o1", conflictSt),
				func(r *statusRecord) (bool, bool) { r.takeChanges(); return true, false }, forget("ns/r1", "ns/never")},
			wantAccepted: true, wantChanged: true,
			wantStatus:  map[string]copycontract.Status{"ns/o1": conflictSt},
			wantChanges: []copycontract.StatusChange{{HelmOp: appOp, Rows: []string{"ns/r1"}}}},
		{name: "forgetting rows without a status is nothing", ops: []op{accept(appOp, "ns/r1"), forget("ns/r1")},
			wantAccepted: true, wantStatus: map[string]copycontract.Status{}},
		{name: "changes by HelmOp in name order, rows sorted",
			ops:          []op{accept(otherOp, "ns/o1"), accept(appOp, "ns/r2", "ns/r1"), record("ns/o1", conflictSt), record("ns/r2", conflictSt), record("ns/r1", conflictSt)},
			wantAccepted: true, wantChanged: true,
			wantStatus: map[string]copycontract.Status{"ns/o1": conflictSt, "ns/r1": conflictSt, "ns/r2": conflictSt},
			wantChanges: []copycontract.StatusChange{{HelmOp: appOp, Rows: []string{"ns/r1", "ns/r2"}},
				{HelmOp: otherOp, Rows: []string{"ns/o1"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newStatusRecord()
			var accepted, changed bool
			for _, o := range tc.ops {
				accepted, changed = o(r)
			}
			if accepted != tc.wantAccepted || changed != tc.wantChanged {
				t.Errorf("last step: accepted=%t changed=%t, want %t %t", accepted, changed, tc.wantAccepted, tc.wantChanged)
			}
			for key, want := range tc.wantStatus {
				if got, ok := r.status(key); !ok || !statusEqual(got, want) {
					t.Errorf("status of %s: %+v (%t), want %+v", key, got, ok, want)
				}
			}
			if len(r.statuses) != len(tc.wantStatus) {
				t.Errorf("%d statuses kept, want %d", len(r.statuses), len(tc.wantStatus))
			}
			if got := r.takeChanges(); !changesEqual(got, tc.wantChanges) {
				t.Errorf("changes %+v, want %+v", got, tc.wantChanges)
			}
			if again := r.takeChanges(); again != nil {
				t.Errorf("a second take found %+v: taking must clear", again)
			}
		})
	}
}

// Leftovers are kept per Cluster and HelmOp; only a change is told.
func TestStatusRecordLeftovers(t *testing.T) {
	left := func(op types.NamespacedName, cluster, name string) copycontract.Leftover {
		return copycontract.Leftover{HelmOp: op, Cluster: cluster, Kind: "Secret", Name: name, TargetNamespace: targetNS, Phase: courier.CopyPhaseKept}
	}
	steps := []struct {
		name        string
		cluster     string
		left        []copycontract.Leftover
		wantChanged bool
		wantOps     []types.NamespacedName
		wantApp     []copycontract.Leftover
		wantTold    []types.NamespacedName
	}{
		{"nothing left, nothing known", "c1", nil, false, []types.NamespacedName{}, nil, nil},
		{"two HelmOps' leftovers in c1, unsorted", "c1", []copycontract.Leftover{left(appOp, "c1", "b"), left(otherOp, "c1", "x"), left(appOp, "c1", "a")},
			true, []types.NamespacedName{appOp, otherOp}, []copycontract.Leftover{left(appOp, "c1", "a"), left(appOp, "c1", "b")}, []types.NamespacedName{appOp, otherOp}},
		{"the same again, in another order", "c1", []copycontract.Leftover{left(otherOp, "c1", "x"), left(appOp, "c1", "a"), left(appOp, "c1", "b")},
			false, []types.NamespacedName{appOp, otherOp}, []copycontract.Leftover{left(appOp, "c1", "a"), left(appOp, "c1", "b")}, nil},
		{"another Cluster adds to one HelmOp", "c2", []copycontract.Leftover{left(appOp, "c2", "a")},
			true, []types.NamespacedName{appOp, otherOp}, []copycontract.Leftover{left(appOp, "c1", "a"), left(appOp, "c1", "b"), left(appOp, "c2", "a")}, []types.NamespacedName{appOp}},
		{"c1 forgotten", "c1", nil,
			true, []types.NamespacedName{appOp}, []copycontract.Leftover{left(appOp, "c2", "a")}, []types.NamespacedName{appOp, otherOp}},
	}
	r := newStatusRecord()
	for _, s := range steps {
		if got := r.setLeftovers(s.cluster, s.left); got != s.wantChanged {
			t.Errorf("%s: changed=%t, want %t", s.name, got, s.wantChanged)
		}
		if got := leftoverOps(r); !slices.Equal(got, s.wantOps) {
			t.Errorf("%s: HelmOps with leftovers %v, want %v", s.name, got, s.wantOps)
		}
		if got := r.leftoversOf(appOp); !slices.Equal(got, s.wantApp) {
			t.Errorf("%s: app's leftovers %v, want %v", s.name, got, s.wantApp)
		}
		var told []types.NamespacedName
		for _, ch := range r.takeChanges() {
			if !ch.Leftovers || len(ch.Rows) != 0 {
				t.Errorf("%s: change %+v, want leftovers only", s.name, ch)
			}
			told = append(told, ch.HelmOp)
		}
		if !slices.Equal(told, s.wantTold) {
			t.Errorf("%s: told %v, want %v", s.name, told, s.wantTold)
		}
	}
}

func statusEqual(a, b copycontract.Status) bool {
	if (a.LastSyncTime == nil) != (b.LastSyncTime == nil) || (a.LastSyncTime != nil && !a.LastSyncTime.Equal(b.LastSyncTime)) {
		return false
	}
	a.LastSyncTime, b.LastSyncTime = nil, nil
	return a == b
}

func changesEqual(a, b []copycontract.StatusChange) bool {
	return slices.EqualFunc(a, b, func(x, y copycontract.StatusChange) bool {
		return x.HelmOp == y.HelmOp && x.Leftovers == y.Leftovers && slices.Equal(x.Rows, y.Rows)
	})
}
