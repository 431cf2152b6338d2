package rowstatus

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

var (
	heardAt  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	syncedAt = metav1.NewTime(heardAt.Add(-time.Minute))
	pulledAt = heardAt.Add(-time.Hour)
	c1       = types.NamespacedName{Namespace: "fleet-default", Name: "c1"}
	// nobodyWhy is why nobody delivers a Cluster (delivery.Of).
	nobodyWhy = `the Cluster's courier.dev/agent-user annotation " x" names no agent Courier can recognise: it has white space around it; correct it, or remove it to push`
)

// deliveries are one delivery of each kind the composer tells apart.
func deliveries() map[string]Delivery {
	engine := copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: "from the engine"}
	engineCopy := copycontract.Status{Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "7", LastSyncTime: &syncedAt}
	report := copycontract.Status{Phase: courier.CopyPhaseConflict, Message: "from the agent"}
	reportCopy := copycontract.Status{Phase: courier.CopyPhaseSynced, Message: "copied by the agent", SyncedResourceVersion: "6", LastSyncTime: &syncedAt}
	note := copycontract.Status{Phase: courier.CopyPhaseDenied, Message: "Fleet's copy is there"}
	reportNote := copycontract.Status{Phase: courier.CopyPhaseDenied, Message: "the kept copy was removed"}
	published := copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: "from the holder"}
	publishedCopy := copycontract.Status{Phase: courier.CopyPhaseSynced, Message: "copied by the holder", SyncedResourceVersion: "5", LastSyncTime: &syncedAt}
	agent := func(heard bool, overdue bool) *Agent {
		a := &Agent{User: "agent-c1", Cluster: c1, Overdue: overdue}
		if heard {
			a.LastHeard, a.Interval = heardAt, 2*time.Second
		} else {
			a.Since = pulledAt
		}
		return a
	}
	return map[string]Delivery{
		"engine, no record":           {},
		"engine record":               {Record: &engine},
		"engine record of a copy":     {Record: &engineCopy},
		"engine note":                 {Record: &note},
		"agent heard, note":           {Record: &reportNote, Agent: agent(true, false)},
		"replica published a note":    {Record: &note, FromReplica: true},
		"agent heard, row unreported": {Agent: agent(true, false)},
		"agent heard, report":         {Record: &report, Agent: agent(true, false)},
		"agent heard, report of copy": {Record: &reportCopy, Agent: agent(true, false)},
		"agent awaited":               {Agent: agent(false, false)},
		"agent silent, no entry":      {Agent: agent(true, true)},
		"agent silent, entry of copy": {Record: &reportCopy, Agent: agent(true, true)},
		"agent never heard":           {Agent: agent(false, true)},
		"replica, nothing published":  {FromReplica: true},
		"replica published":           {Record: &published, FromReplica: true},
		"replica published a copy":    {Record: &publishedCopy, FromReplica: true},
		"nobody":                      {Nobody: nobodyWhy},
		"nobody, replica published":   {Nobody: nobodyWhy, Record: &publishedCopy, FromReplica: true},
	}
}

// bases are the bases the view computes.
func bases() map[courier.CopyPhase]courier.DownstreamCopyStatus {
	out := map[courier.CopyPhase]courier.DownstreamCopyStatus{}
	for _, p := range []courier.CopyPhase{courier.CopyPhaseInvalid, courier.CopyPhaseDenied, courier.CopyPhaseKept,
		courier.CopyPhaseDeleting, courier.CopyPhaseSourceMissing, courier.CopyPhasePending} {
		out[p] = New(p, "base "+string(p))
	}
	return out
}

// TestPrecedence covers each rule of the precedence table, in order: the
// rule that decides, and the status composed.
func TestPrecedence(t *testing.T) {
	d := deliveries()
	b := bases()
	silent := "the courier-agent agent-c1 of Cluster fleet-default/c1 was last heard at 2026-11-30T12:00:00Z and reports every 2s: nothing for 3 intervals"
	waiting := "waiting for the courier-agent agent-c1 of Cluster fleet-default/c1 to report"
	waitingFirst := waiting + ": nothing since 2026-11-30T11:00:00Z, when the Cluster was seen pulled; Unreachable after 1m30s without a report"
	never := "the courier-agent agent-c1 of Cluster fleet-default/c1 has never reported: nothing since 2026-11-30T11:00:00Z, " +
		"when the Cluster was seen pulled, for 3 default intervals (30s)"
	for _, tc := range []struct {
		rule     int
		base     courier.CopyPhase
		delivery string
		want     courier.CopyPhase
		message  string
		syncedRV string
	}{
		{0, courier.CopyPhaseInvalid, "agent heard, report of copy", courier.CopyPhaseInvalid, "base Invalid", ""},
		{1, courier.CopyPhaseDenied, "engine note", courier.CopyPhaseDenied, "base Denied; Fleet's copy is there", ""},
		{1, courier.CopyPhaseDenied, "agent heard, note", courier.CopyPhaseDenied, "base Denied; the kept copy was removed", ""},
		{2, courier.CopyPhaseDenied, "engine record of a copy", courier.CopyPhaseDenied, "base Denied", ""},
		{3, courier.CopyPhaseKept, "engine, no record", courier.CopyPhaseKept, "base Kept", ""},
		{4, courier.CopyPhaseDeleting, "agent silent, no entry", courier.CopyPhaseDeleting, "base Deleting", ""},
		{5, courier.CopyPhaseSourceMissing, "engine record of a copy", courier.CopyPhaseSourceMissing,
			"base SourceMissing; the copy made from resourceVersion 7 stays in cluster c1", "7"},
		{5, courier.CopyPhaseSourceMissing, "agent silent, entry of copy", courier.CopyPhaseSourceMissing,
			"base SourceMissing; the copy made from resourceVersion 6 stays in cluster c1", "6"},
		{6, courier.CopyPhaseSourceMissing, "engine record", courier.CopyPhaseSourceMissing, "base SourceMissing", ""},
		{7, courier.CopyPhasePending, "nobody", courier.CopyPhaseInvalid, nobodyWhy, ""},
		{7, courier.CopyPhasePending, "nobody, replica published", courier.CopyPhaseInvalid, nobodyWhy, ""},
		{0, courier.CopyPhaseInvalid, "nobody", courier.CopyPhaseInvalid, "base Invalid", ""},
		{6, courier.CopyPhaseSourceMissing, "nobody", courier.CopyPhaseSourceMissing, "base SourceMissing", ""},
		{8, courier.CopyPhasePending, "agent silent, entry of copy", courier.CopyPhaseUnreachable, silent, "6"},
		{8, courier.CopyPhasePending, "agent silent, no entry", courier.CopyPhaseUnreachable, silent, ""},
		{9, courier.CopyPhasePending, "agent never heard", courier.CopyPhaseUnreachable, never, ""},
		{10, courier.CopyPhasePending, "agent awaited", courier.CopyPhasePending, waitingFirst, ""},
		{11, courier.CopyPhasePending, "agent heard, row unreported", courier.CopyPhasePending, waiting, ""},
		{12, courier.CopyPhasePending, "agent heard, report", courier.CopyPhaseConflict, "from the agent", ""},
		{12, courier.CopyPhasePending, "engine record of a copy", courier.CopyPhaseSynced, "copied", "7"},
		{13, courier.CopyPhasePending, "engine, no record", courier.CopyPhasePending, "base Pending", ""},
		// A pushed Cluster another replica delivers to: what it published,
		// under the same precedence as the engine's own record.
		{0, courier.CopyPhaseInvalid, "replica published a copy", courier.CopyPhaseInvalid, "base Invalid", ""},
		{1, courier.CopyPhaseDenied, "replica published a note", courier.CopyPhaseDenied, "base Denied; Fleet's copy is there", ""},
		{2, courier.CopyPhaseDenied, "replica published", courier.CopyPhaseDenied, "base Denied", ""},
		{5, courier.CopyPhaseSourceMissing, "replica published a copy", courier.CopyPhaseSourceMissing,
			"base SourceMissing; the copy made from resourceVersion 5 stays in cluster c1", "5"},
		{6, courier.CopyPhaseSourceMissing, "replica, nothing published", courier.CopyPhaseSourceMissing, "base SourceMissing", ""},
		{12, courier.CopyPhasePending, "replica published", courier.CopyPhaseForbidden, "from the holder", ""},
		{12, courier.CopyPhasePending, "replica published a copy", courier.CopyPhaseSynced, "copied by the holder", "5"},
		{14, courier.CopyPhasePending, "replica, nothing published", courier.CopyPhasePending, "base Pending", ""},
	} {
		t.Run(fmt.Sprintf("rule %d: %s, %s", tc.rule, tc.base, tc.delivery), func(t *testing.T) {
			del, ok := d[tc.delivery]
			if !ok {
				t.Fatalf("no delivery %q", tc.delivery)
			}
			if got := ruleFor(tc.base, del); got != tc.rule {
				t.Errorf("decided by rule %d, want %d", got, tc.rule)
			}
			got := Compose(b[tc.base], "c1", del)
			if got.Phase != tc.want || got.Message != tc.message || got.SyncedResourceVersion != tc.syncedRV {
				t.Errorf("composed %s %q (synced %q), want %s %q (synced %q)", got.Phase, got.Message, got.SyncedResourceVersion,
					tc.want, tc.message, tc.syncedRV)
			}
			if tc.syncedRV != "" && (got.LastSyncTime == nil || !got.LastSyncTime.Equal(&syncedAt)) {
				t.Errorf("last sync %v, want the record's", got.LastSyncTime)
			}
			if len(got.Conditions) != 1 || got.Conditions[0].Reason != string(got.Phase) || got.Conditions[0].Message != got.Message {
				t.Errorf("Ready condition %+v does not say what the status says", got.Conditions)
			}
		})
	}
}

// Every base the view computes, with every kind of delivery, is decided by
// a rule, and every rule decides some of them: the table has no gap and
// no dead row.
func TestPrecedenceIsComplete(t *testing.T) {
	used := make([]bool, len(precedence))
	for phase, base := range bases() {
		for name, d := range deliveries() {
			i := ruleFor(phase, d)
			if i < 0 {
				t.Errorf("no rule for base %s with %s", phase, name)
				continue
			}
			used[i] = true
			// The view's own verdicts never give way.
			if got := Compose(base, "c1", d); phase != courier.CopyPhasePending && got.Phase != phase {
				t.Errorf("base %s with %s shows %s", phase, name, got.Phase)
			}
		}
	}
	for i, u := range used {
		if !u {
			t.Errorf("rule %d (%+v) decides nothing", i, precedence[i])
		}
	}
}

// The status endpoint answers with the status the row will show.
func TestReported(t *testing.T) {
	synced := copycontract.Status{Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "7", LastSyncTime: &syncedAt}
	spec := courier.DownstreamCopySpec{Cluster: "c1", Source: courier.CopySource{Kind: "Secret", Name: "s", ResourceVersion: "7"},
		Target: courier.CopyTarget{Namespace: "apps", Name: "s"}}
	missing := spec
	missing.Source.ResourceVersion = ""
	denied := &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "r",
		Labels: map[string]string{courier.LabelDeliver: "false"}}, Spec: spec, Status: New(courier.CopyPhaseDenied, "never exported")}
	for _, tc := range []struct {
		name string
		row  *courier.DownstreamCopy
		want courier.CopyPhase
	}{
		{"copyable: the report", &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "r"}, Spec: spec}, courier.CopyPhaseSynced},
		{"missing source: the view's", &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "r"}, Spec: missing},
			courier.CopyPhaseSourceMissing},
		{"not delivered: the view's", denied, courier.CopyPhaseDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reported(tc.row, synced); got.Phase != tc.want {
				t.Errorf("%s %q, want %s", got.Phase, got.Message, tc.want)
			}
		})
	}
}
