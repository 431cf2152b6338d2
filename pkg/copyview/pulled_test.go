package copyview

import (
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// fakeReports holds reports the test sets.
type fakeReports struct {
	mu      sync.Mutex
	reports map[types.NamespacedName]*clusterstatus.Report
}

func (f *fakeReports) Report(c types.NamespacedName) (*clusterstatus.Report, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.reports[c]
	return r, ok
}

func (f *fakeReports) HasSynced() bool { return true }

// Leftovers answers from the reports' leftovers, as the Store's index.
func (f *fakeReports) Leftovers(owner types.NamespacedName) []copycontract.Leftover {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []copycontract.Leftover
	for _, r := range f.reports {
		for _, l := range r.Leftovers {
			if l.HelmOp == owner {
				out = append(out, l)
			}
		}
	}
	return out
}

func (f *fakeReports) set(c types.NamespacedName, heard time.Time, interval time.Duration, rows map[string]clusterstatus.Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports[c] = &clusterstatus.Report{Cluster: c, Rows: rows,
		Heartbeat: clusterstatus.Heartbeat{LastHeard: metav1.NewMicroTime(heard), Interval: metav1.Duration{Duration: interval}}}
}

var pulledC1 = types.NamespacedName{Namespace: "fleet-default", Name: "c1"}

// newPulledFixture is the controller over workspace objects where c1 is
// pulled by agent-c1 and c2 pushed, with a fake clock and fake reports.
func newPulledFixture(t *testing.T) (*fixture, *fakeReports, *clocktesting.FakeClock) {
	t.Helper()
	c1 := cluster("c1", nil)
	c1.Annotations = map[string]string{courier.AnnotationAgentUser: "agent-c1"}
	objs := []any{
		helmOp("app", listing("Secret/creds", "Secret/absent", "Deployment/web")),
		c1, cluster("c2", nil), defaultGroup, source("Secret", "creds", "7"),
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	reports := &fakeReports{reports: map[types.NamespacedName]*clusterstatus.Report{}}
	f := &fixture{t: t, caches: newCaches(t, objs...), engine: newFakeEngine(),
		store: memstore.New[*courier.DownstreamCopy](memstore.WithInitialResourceVersion(1000))}
	_, f.ctx = ktesting.NewTestContext(t)
	// The engine's record of a pulled Cluster's row must not show.
	f.engine.setStatus("fleet-default/app.c1.secret.creds", copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: "from the engine"})
	f.engine.setStatus("fleet-default/app.c2.secret.creds", copycontract.Status{Phase: courier.CopyPhaseConflict, Message: "from the engine"})
	in := f.caches.inputs()
	in.Reports = reports
	f.c = newController(in, f.store, f.engine, f.caches.helmOps)
	f.c.clock, f.c.now = clk, clk.Now
	if err := f.c.queueAll(); err != nil {
		t.Fatal(err)
	}
	f.drain()
	f.engine.takeCalls()
	return f, reports, clk
}

func wantPhase(t *testing.T, f *fixture, row string, phase courier.CopyPhase, msg string) *courier.DownstreamCopy {
	t.Helper()
	r := f.row(row)
	if r.Status.Phase != phase || !strings.Contains(r.Status.Message, msg) {
		t.Errorf("%s: %s %q, want %s containing %q", row, r.Status.Phase, r.Status.Message, phase, msg)
	}
	return r
}

func TestPulledRowsShowTheAgentsReport(t *testing.T) {
	f, reports, clk := newPulledFixture(t)
	const creds = "app.c1.secret.creds"
	wantPhase(t, f, creds, courier.CopyPhasePending, "waiting for the courier-agent agent-c1 of Cluster fleet-default/c1 to report")
	wantPhase(t, f, "app.c1.secret.absent", courier.CopyPhaseSourceMissing, "")
	wantPhase(t, f, "app.c1.deployment.web", courier.CopyPhaseInvalid, "")
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhaseConflict, "from the engine")

	synced := metav1.NewTime(clk.Now())
	heard := clk.Now()
	reports.set(pulledC1, heard, 2*time.Second, map[string]clusterstatus.Entry{
		creds:                   {Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "7", LastSyncTime: &synced},
		"app.c1.secret.absent":  {Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "3"},
		"app.c1.deployment.web": {Phase: courier.CopyPhaseSynced},
	})
	rv := f.rv()
	f.c.ReportChanged(pulledC1)
	f.drain()
	r := wantPhase(t, f, creds, courier.CopyPhaseSynced, "copied")
	if r.Status.SyncedResourceVersion != "7" || r.Status.LastSyncTime == nil || !r.Status.LastSyncTime.Equal(&synced) {
		t.Errorf("synced RV %q, last sync %v", r.Status.SyncedResourceVersion, r.Status.LastSyncTime)
	}
	// The view's own phases keep precedence over a report.
	wantPhase(t, f, "app.c1.secret.absent", courier.CopyPhaseSourceMissing, "the copy made from resourceVersion 3 stays")
	wantPhase(t, f, "app.c1.deployment.web", courier.CopyPhaseInvalid, "")
	if calls := f.engine.takeCalls(); len(calls) != 0 {
		t.Errorf("a report recomputed the HelmOp: %v", calls)
	}
	if got := f.rv() - rv; got != 2 { // creds and absent; c2's rows untouched
		t.Errorf("a report wrote %d rows, want 2", got)
	}

	// Nothing for just under three intervals: still fresh, nothing queued.
	clk.Step(6*time.Second - time.Millisecond)
	if f.c.queue.Len() != 0 {
		t.Fatal("the deadline fired early")
	}
	wantPhase(t, f, creds, courier.CopyPhaseSynced, "copied")

	clk.Step(time.Millisecond)
	if f.c.queue.Len() != 1 {
		t.Fatal("the deadline did not queue the Cluster's HelmOp")
	}
	f.drain()
	r = wantPhase(t, f, creds, courier.CopyPhaseUnreachable,
		"the courier-agent agent-c1 of Cluster fleet-default/c1 was last heard at 2026-11-30T12:00:00Z and reports every 2s")
	if r.Status.SyncedResourceVersion != "7" {
		t.Errorf("an Unreachable row forgot its synced RV: %q", r.Status.SyncedResourceVersion)
	}
	wantPhase(t, f, "app.c1.deployment.web", courier.CopyPhaseInvalid, "")
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhaseConflict, "from the engine")

	// The agent is back.
	reports.set(pulledC1, clk.Now(), 2*time.Second, map[string]clusterstatus.Entry{creds: {Phase: courier.CopyPhaseSynced, Message: "again"}})
	f.c.ReportChanged(pulledC1)
	f.drain()
	wantPhase(t, f, creds, courier.CopyPhaseSynced, "again")
	wantPhase(t, f, "app.c1.secret.absent", courier.CopyPhaseSourceMissing, "")
	clk.Step(6 * time.Second)
	f.drain()
	wantPhase(t, f, creds, courier.CopyPhaseUnreachable, "last heard at 2026-11-30T12:00:06Z")
}

func TestPulledRowWithoutEntryWaits(t *testing.T) {
	f, reports, clk := newPulledFixture(t)
	reports.set(pulledC1, clk.Now(), 30*time.Second, map[string]clusterstatus.Entry{})
	f.c.ReportChanged(pulledC1)
	f.drain()
	wantPhase(t, f, "app.c1.secret.creds", courier.CopyPhasePending, "waiting for the courier-agent agent-c1")
	clk.Step(90 * time.Second)
	f.drain()
	wantPhase(t, f, "app.c1.secret.creds", courier.CopyPhaseUnreachable, "was last heard at")
}

func TestClusterTurningPulledIsRecomputed(t *testing.T) {
	f, _, _ := newPulledFixture(t)
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhaseConflict, "from the engine")
	old := cluster("c2", nil)
	pulled := old.DeepCopy()
	pulled.Annotations = map[string]string{courier.AnnotationAgentUser: "agent-c2"}
	f.c.started.Store(true)
	f.update(old, pulled)
	f.drain()
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhasePending, "waiting for the courier-agent agent-c2")
}

// A Cluster whose agent annotation turns malformed is delivered by nobody
// (delivery.Of): its rows are Invalid saying why, not the engine's record
// nor a wait for an agent; emptied, it is pushed again and shows the
// engine's record.
func TestClusterNobodyDelivers(t *testing.T) {
	f, _, _ := newPulledFixture(t)
	const row = "app.c2.secret.creds"
	wantPhase(t, f, row, courier.CopyPhaseConflict, "from the engine")
	old := cluster("c2", nil)
	malformed := old.DeepCopy()
	malformed.Annotations = map[string]string{courier.AnnotationAgentUser: "agent-c2 "}
	f.c.started.Store(true)
	f.update(old, malformed)
	f.drain()
	wantPhase(t, f, row, courier.CopyPhaseInvalid, `annotation "agent-c2 " names no agent Courier can recognise: it has white space around it`)
	empty := old.DeepCopy()
	empty.Annotations = map[string]string{courier.AnnotationAgentUser: ""}
	f.update(malformed, empty)
	f.drain()
	wantPhase(t, f, row, courier.CopyPhaseConflict, "from the engine")
}

// A report for a Cluster with no rows, or for rows that went, costs
// nothing and fails nothing.
func TestReportOfClusterWithoutRows(t *testing.T) {
	f, _, _ := newPulledFixture(t)
	f.c.ReportChanged(types.NamespacedName{Namespace: "fleet-default", Name: "nowhere"})
	if f.c.queue.Len() != 0 {
		t.Error("a report of a Cluster without rows queued work")
	}
}

// A pulled Cluster whose agent never reports: its rows wait for that
// agent, saying since when, and turn Unreachable three default intervals
// later by the deadline timer alone, writing only that Cluster's rows.
func TestPulledAgentThatNeverReports(t *testing.T) {
	f, reports, clk := newPulledFixture(t)
	const creds = "app.c1.secret.creds"
	wantPhase(t, f, creds, courier.CopyPhasePending,
		"waiting for the courier-agent agent-c1 of Cluster fleet-default/c1 to report: nothing since 2026-11-30T12:00:00Z, "+
			"when the Cluster was seen pulled; Unreachable after 1m30s without a report")
	rv := f.rv()

	clk.Step(rowstatus.MissedIntervals*rowstatus.DefaultInterval - time.Millisecond)
	if f.c.queue.Len() != 0 {
		t.Fatal("the first report's deadline fired early")
	}
	clk.Step(time.Millisecond)
	if f.c.queue.Len() != 1 {
		t.Fatal("the first report's deadline did not queue the Cluster's HelmOp")
	}
	f.drain()
	wantPhase(t, f, creds, courier.CopyPhaseUnreachable,
		"the courier-agent agent-c1 of Cluster fleet-default/c1 has never reported: nothing since 2026-11-30T12:00:00Z")
	wantPhase(t, f, "app.c1.secret.absent", courier.CopyPhaseSourceMissing, "")
	wantPhase(t, f, "app.c1.deployment.web", courier.CopyPhaseInvalid, "")
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhaseConflict, "from the engine")
	if got := f.rv() - rv; got != 1 {
		t.Errorf("the deadline wrote %d rows, want 1 (creds)", got)
	}
	if calls := f.engine.takeCalls(); len(calls) != 0 {
		t.Errorf("the deadline recomputed the HelmOp: %v", calls)
	}

	// The agent reports at last: its report shows, and the wait is over.
	reports.set(pulledC1, clk.Now(), 2*time.Second, map[string]clusterstatus.Entry{creds: {Phase: courier.CopyPhaseSynced, Message: "copied"}})
	f.c.ReportChanged(pulledC1)
	f.drain()
	wantPhase(t, f, creds, courier.CopyPhaseSynced, "copied")
	f.c.dmu.Lock()
	_, waiting := f.c.awaiting[pulledC1]
	f.c.dmu.Unlock()
	if waiting {
		t.Error("a Cluster whose agent reported is still awaited")
	}
}

// Each pulled Cluster waits from when the view saw it pulled, and a
// Cluster that turns pulled later waits from then.
func TestPulledSinceIsPerCluster(t *testing.T) {
	f, _, clk := newPulledFixture(t)
	f.c.started.Store(true)
	clk.Step(time.Minute)
	old := cluster("c2", nil)
	pulled := old.DeepCopy()
	pulled.Annotations = map[string]string{courier.AnnotationAgentUser: "agent-c2"}
	f.update(old, pulled)
	f.drain()
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhasePending,
		"waiting for the courier-agent agent-c2 of Cluster fleet-default/c2 to report: nothing since 2026-11-30T12:01:00Z")

	clk.Step(30 * time.Second) // c1's deadline
	f.drain()
	wantPhase(t, f, "app.c1.secret.creds", courier.CopyPhaseUnreachable, "has never reported")
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhasePending, "waiting for the courier-agent agent-c2")

	clk.Step(time.Minute) // c2's
	f.drain()
	wantPhase(t, f, "app.c2.secret.creds", courier.CopyPhaseUnreachable,
		"the courier-agent agent-c2 of Cluster fleet-default/c2 has never reported: nothing since 2026-11-30T12:01:00Z")
}
