package copyview

import (
	"slices"
	"testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// A new version of a source changes only the rows that name it: they get
// the new resourceVersion, keep what the engine recorded, and are handed
// to the engine as they are (UpdateDesired), without a full sync of their
// HelmOp. When that cannot be done -- the engine refuses, the source is
// gone by the time the change is processed, a full sync is queued too --
// the HelmOp is synced in full, as before.
func TestSourceChangeUpdatesOnlyItsRows(t *testing.T) {
	creds := source("Secret", "creds", "1")
	cases := []struct {
		name    string
		refuse  bool
		pulled  []string // Clusters with an agent user: their agents deliver
		event   func(f *fixture)
		want    []string // engine calls, sorted
		wantRV  string   // the creds rows' source resourceVersion afterwards
		wantRow courier.CopyPhase
	}{
		{name: "a new version: the rows naming it, one by one",
			event: func(f *fixture) { f.update(creds, withRV(creds, "5")) },
			want:  []string{"update fleet-default/app 2"}, wantRV: "5", wantRow: courier.CopyPhaseSynced},
		{name: "the engine cannot take them: a full sync", refuse: true,
			event: func(f *fixture) { f.update(creds, withRV(creds, "5")) },
			want:  []string{"set fleet-default/app 2", "update fleet-default/app 2 refused"}, wantRV: "5", wantRow: courier.CopyPhaseSynced},
		{name: "gone before the change is processed: a full sync, SourceMissing",
			event: func(f *fixture) {
				f.update(creds, withRV(creds, "5"))
				f.remove(withRV(creds, "5"))
			},
			want: []string{"set fleet-default/app 2"}, wantRV: "", wantRow: courier.CopyPhaseSourceMissing},
		{name: "c2 pulled: only c1's row goes to the engine; both rows change",
			pulled: []string{"c2"},
			event:  func(f *fixture) { f.update(creds, withRV(creds, "5")) },
			want:   []string{"update fleet-default/app 1"}, wantRV: "5", wantRow: courier.CopyPhaseSynced},
		{name: "every Cluster pulled: nothing for the engine; both rows change",
			pulled: []string{"c1", "c2"},
			event:  func(f *fixture) { f.update(creds, withRV(creds, "5")) },
			want:   []string{}, wantRV: "5", wantRow: courier.CopyPhaseSynced},
		{name: "the same version again: nothing",
			event: func(f *fixture) { f.update(creds, creds.DeepCopy()) },
			want:  []string{}, wantRV: "1", wantRow: courier.CopyPhaseSynced},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := workspaces()
			for _, o := range objs {
				if c, ok := o.(*fleet.Cluster); ok && slices.Contains(tc.pulled, c.Name) && c.Namespace == "fleet-default" {
					c.Annotations = map[string]string{courier.AnnotationAgentUser: "agent-" + c.Name}
				}
			}
			f := newFixture(t, objs...)
			f.engine.refuseUpdates = tc.refuse
			for _, c := range []string{"c1", "c2"} {
				f.engine.setStatus("fleet-default/app."+c+".secret.creds", copycontract.Status{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "1"})
			}
			f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Rows: []string{"fleet-default/app.c1.secret.creds", "fleet-default/app.c2.secret.creds"}}})
			f.drain()
			f.engine.takeCalls()
			settings := f.row("web.c1.configmap.settings").DeepCopy()

			tc.event(f)
			f.drain()

			if got := f.engine.takeCalls(); !slices.Equal(got, tc.want) {
				t.Errorf("engine calls %q, want %q", got, tc.want)
			}
			for _, c := range []string{"c1", "c2"} {
				r := f.row("app." + c + ".secret.creds")
				want := tc.wantRow
				if slices.Contains(tc.pulled, c) {
					want = courier.CopyPhasePending // no report from its agent
				}
				if r.Spec.Source.ResourceVersion != tc.wantRV || r.Status.Phase != want {
					t.Errorf("row for %s: source resourceVersion %q, phase %s; want %q, %s", c, r.Spec.Source.ResourceVersion, r.Status.Phase, tc.wantRV, want)
				}
			}
			if got := f.row("web.c1.configmap.settings"); got.ResourceVersion != settings.ResourceVersion {
				t.Errorf("a row naming another source was written: resourceVersion %s, was %s", got.ResourceVersion, settings.ResourceVersion)
			}
		})
	}
}

// A row's source index follows the rows: a HelmOp that stops listing a
// source leaves no row under it, and a change of that source then touches
// nothing of the HelmOp.
func TestSourceIndexFollowsTheRows(t *testing.T) {
	f := newFixture(t, workspaces()...)
	app := helmOp("app", listing("Secret/creds"))
	n := app.DeepCopy()
	n.Spec.DownstreamResources = []fleet.DownstreamResource{{Kind: "Secret", Name: "other"}}
	f.update(app, n)
	f.drain()
	f.c.mu.Lock()
	for key, op := range f.c.bySource.rows["fleet-default/secret/creds"] {
		if op == appOp {
			t.Errorf("row %s of app still filed under creds", key)
		}
	}
	if len(f.c.bySource.rows["fleet-default/secret/other"]) != 2 {
		t.Errorf("rows under other: %v, want app's two", f.c.bySource.rows["fleet-default/secret/other"])
	}
	f.c.mu.Unlock()
}
