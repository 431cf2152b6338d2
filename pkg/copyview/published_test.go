package copyview

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/copycontract"
)

var pushedC2 = types.NamespacedName{Namespace: "fleet-default", Name: "c2"}

// A pushed Cluster's rows show the engine's record on the replica that
// delivers to it, and what its deliverer published on every other; a
// replica that delivers but has not recorded the row yet (it just gained
// the Cluster) shows what was published.
func TestPushedRowsShowTheDeliverersWord(t *testing.T) {
	f, reports, clk := newPulledFixture(t)
	const creds = "app.c2.secret.creds"
	// This replica delivers to c2: its own record (set by the fixture).
	wantPhase(t, f, creds, courier.CopyPhaseConflict, "from the engine")

	// Another replica delivers to c2 and published Synced: that shows, not
	// this replica's own record.
	synced := metav1.NewTime(clk.Now().Add(-time.Hour))
	reports.mu.Lock()
	reports.reports[pushedC2] = &clusterstatus.Report{Cluster: pushedC2, Rows: map[string]clusterstatus.Entry{
		creds: {Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "7", LastSyncTime: &synced}}}
	reports.mu.Unlock()
	f.engine.setElsewhere("fleet-default/c2", true)
	f.c.ReportChanged(pushedC2)
	f.drain()
	r := wantPhase(t, f, creds, courier.CopyPhaseSynced, "copied")
	if r.Status.SyncedResourceVersion != "7" || r.Status.LastSyncTime == nil || !r.Status.LastSyncTime.Equal(&synced) {
		t.Errorf("synced RV %q, last sync %v: not the published ones", r.Status.SyncedResourceVersion, r.Status.LastSyncTime)
	}
	// The view's own verdicts keep precedence over what was published.
	wantPhase(t, f, "app.c2.secret.absent", courier.CopyPhaseSourceMissing, "")

	// This replica gains c2 and has no record yet: the published word.
	f.engine.setElsewhere("fleet-default/c2", false)
	f.engine.forgetStatus("fleet-default/" + creds)
	f.c.ReportChanged(pushedC2)
	f.drain()
	wantPhase(t, f, creds, courier.CopyPhaseSynced, "copied")

	// Its first pass records Forbidden: its own record shows.
	f.engine.setStatus("fleet-default/"+creds, copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: "refused"})
	f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: types.NamespacedName{Namespace: "fleet-default", Name: "app"},
		Rows: []string{"fleet-default/" + creds}}})
	f.drain()
	wantPhase(t, f, creds, courier.CopyPhaseForbidden, "refused")

	// Nothing published and another replica delivers: the base.
	reports.mu.Lock()
	delete(reports.reports, pushedC2)
	reports.mu.Unlock()
	f.engine.setElsewhere("fleet-default/c2", true)
	f.engine.forgetStatus("fleet-default/" + creds)
	f.c.ReportChanged(pushedC2)
	f.drain()
	wantPhase(t, f, creds, courier.CopyPhasePending, "is not copied to cluster c2 yet")
}

// The rows of a pushed Cluster's leftover copies show on every replica:
// the engine's own on the replica that delivers to the Cluster, what the
// deliverer published on every other (never this replica's own); an
// object's change re-syncs only the owners whose leftovers it changed.
func TestLeftoverRowsShowTheDeliverersWord(t *testing.T) {
	f, reports, _ := newPulledFixture(t)
	kept := func(msg string) copycontract.Leftover {
		return copycontract.Leftover{HelmOp: appOp, Cluster: pushedC2.Name, Kind: "Secret", Name: "old", TargetNamespace: "apps",
			Keep: true, Phase: courier.CopyPhaseKept, Message: msg}
	}
	const row = "app.c2.secret.old"
	// Positive control: this replica delivers to c2, its engine found the
	// copy kept, and the object says otherwise: the engine's word shows.
	reports.mu.Lock()
	reports.reports[pushedC2] = &clusterstatus.Report{Cluster: pushedC2, Leftovers: []copycontract.Leftover{kept("published")}}
	reports.mu.Unlock()
	f.engine.setLeftovers(appOp, kept("the engine's"))
	f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: appOp, Leftovers: true}})
	f.drain()
	wantPhase(t, f, row, courier.CopyPhaseKept, "the engine's")

	// It delivers to c2 but has not swept it since it gained it: what the
	// previous deliverer published.
	f.engine.mu.Lock()
	f.engine.unswept = map[string]bool{"fleet-default/c2": true}
	f.engine.mu.Unlock()
	f.c.LeftoversChanged(appOp)
	f.drain()
	wantPhase(t, f, row, courier.CopyPhaseKept, "published")
	f.engine.mu.Lock()
	f.engine.unswept = nil
	f.engine.mu.Unlock()
	f.c.LeftoversChanged(appOp)
	f.drain()
	wantPhase(t, f, row, courier.CopyPhaseKept, "the engine's")

	// Another replica delivers to c2: what it published, not the engine's.
	f.engine.setElsewhere("fleet-default/c2", true)
	f.c.LeftoversChanged(appOp)
	f.drain()
	r := wantPhase(t, f, row, courier.CopyPhaseKept, "published")
	if !r.Spec.KeepResources || r.Spec.Target.Namespace != "apps" {
		t.Errorf("the published leftover's row: %+v", r.Spec)
	}

	// The deliverer published the leftover gone: the row goes, and only
	// the owner told is synced again (not recomputed).
	f.engine.takeCalls()
	reports.mu.Lock()
	reports.reports[pushedC2] = &clusterstatus.Report{Cluster: pushedC2}
	reports.mu.Unlock()
	f.c.LeftoversChanged(appOp)
	f.drain()
	if _, ok := f.store.Get("fleet-default", row); ok {
		t.Error("the Kept row stayed after its deliverer published it gone")
	}
	if calls := f.engine.takeCalls(); len(calls) != 0 {
		t.Errorf("a leftover change recomputed rows: %q", calls)
	}

	// A stored leftover of a pulled Cluster (c1) never shows.
	pulled := kept("of a pulled Cluster")
	pulled.Cluster = pulledC1.Name
	reports.mu.Lock()
	reports.reports[pulledC1] = &clusterstatus.Report{Cluster: pulledC1, Leftovers: []copycontract.Leftover{pulled}}
	reports.mu.Unlock()
	f.engine.setElsewhere("fleet-default/c1", true)
	f.c.LeftoversChanged(appOp)
	f.drain()
	if _, ok := f.store.Get("fleet-default", "app.c1.secret.old"); ok {
		t.Error("a pulled Cluster's stored leftover shows")
	}
}
