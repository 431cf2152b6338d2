package copysummary

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

var (
	helmOpApp = courier.CopyOwner{Kind: courier.OwnerKindHelmOp, Name: "app"}
	t0        = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
)

// row is a row of HelmOp app in namespace ws, for Secret kind/name at
// source version srcRV, in phase with syncedRV.
func row(cluster, source, srcRV string, phase courier.CopyPhase, syncedRV string) Row {
	kind, name, _ := strings.Cut(source, "/")
	return Row{
		Name: "app." + cluster + "." + strings.ToLower(kind) + "." + name, Namespace: "ws", Owner: helmOpApp, Cluster: cluster,
		Source: courier.CopySource{Kind: kind, Name: name, ResourceVersion: srcRV}, Phase: phase, SyncedRV: syncedRV,
		Message: string(phase) + " on " + cluster, CreationTime: t0,
	}
}

func withMessage(r Row, m string) Row { r.Message = m; return r }

func TestCompute(t *testing.T) {
	synced := courier.CopyPhaseSynced
	tcs := []struct {
		name         string
		rows         []Row
		want         courier.DownstreamCopySummaryStatus // Conditions, NonReady, Message checked apart
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantNonReady []string // name/phase
		wantMessage  string
	}{{
		name: "all synced at the current version",
		rows: []Row{row("a", "Secret/s", "5", synced, "5"), row("b", "Secret/s", "5", synced, "5"), row("a", "ConfigMap/m", "7", synced, "7")},
		want: courier.DownstreamCopySummaryStatus{Clusters: 2, ReadyClusters: 2, Copies: 3, SyncedCopies: 3, Phases: map[string]int32{"Synced": 3},
			Sources: []courier.SummarySource{{Kind: "ConfigMap", Name: "m", ResourceVersion: "7", Copies: 1, SyncedCopies: 1}, {Kind: "Secret", Name: "s", ResourceVersion: "5", Copies: 2, SyncedCopies: 2}}},
		wantReady: metav1.ConditionTrue, wantReason: ReasonSynced,
	}, {
		name: "synced at an older version is not synced; the newest version a row names is current",
		rows: []Row{row("a", "Secret/s", "6", synced, "6"), row("b", "Secret/s", "5", synced, "5")},
		want: courier.DownstreamCopySummaryStatus{Clusters: 2, ReadyClusters: 1, Copies: 2, SyncedCopies: 1, Phases: map[string]int32{"Synced": 2},
			Sources: []courier.SummarySource{{Kind: "Secret", Name: "s", ResourceVersion: "6", Copies: 2, SyncedCopies: 1}}},
		wantReady: metav1.ConditionFalse, wantReason: ReasonProgressing,
		wantNonReady: []string{"app.b.secret.s/Synced"},
		wantMessage:  "OutOfDate(1) [Cluster ws/b: Secret s copied at resourceVersion 5, not the current one]",
	}, {
		name: "versions compare as numbers",
		rows: []Row{row("a", "Secret/s", "10", synced, "10"), row("b", "Secret/s", "9", synced, "9")},
		want: courier.DownstreamCopySummaryStatus{Clusters: 2, ReadyClusters: 1, Copies: 2, SyncedCopies: 1, Phases: map[string]int32{"Synced": 2},
			Sources: []courier.SummarySource{{Kind: "Secret", Name: "s", ResourceVersion: "10", Copies: 2, SyncedCopies: 1}}},
		wantReady: metav1.ConditionFalse, wantReason: ReasonProgressing,
		wantNonReady: []string{"app.b.secret.s/Synced"},
		wantMessage:  "OutOfDate(1) [Cluster ws/b: Secret s copied at resourceVersion 9, not the current one]",
	}, {
		name: "leftovers count in phases only",
		rows: []Row{row("a", "Secret/s", "5", synced, "5"), row("b", "Secret/s", "5", courier.CopyPhaseKept, "4"), row("c", "Secret/s", "5", courier.CopyPhaseDeleting, "")},
		want: courier.DownstreamCopySummaryStatus{Clusters: 1, ReadyClusters: 1, Copies: 1, SyncedCopies: 1, Phases: map[string]int32{"Synced": 1, "Kept": 1, "Deleting": 1},
			Sources: []courier.SummarySource{{Kind: "Secret", Name: "s", ResourceVersion: "5", Copies: 1, SyncedCopies: 1}}},
		wantReady: metav1.ConditionTrue, wantReason: ReasonSynced,
	}, {
		name:      "only leftovers: nothing wanted",
		rows:      []Row{row("b", "Secret/s", "5", courier.CopyPhaseKept, "4")},
		want:      courier.DownstreamCopySummaryStatus{Phases: map[string]int32{"Kept": 1}},
		wantReady: metav1.ConditionTrue, wantReason: ReasonNoCopies,
	}, {
		name: "failing first, then by cluster; a cluster with one failing copy is not ready",
		rows: []Row{
			row("b", "Secret/s", "5", courier.CopyPhasePending, ""), row("a", "Secret/s", "5", courier.CopyPhasePending, ""),
			withMessage(row("z", "Secret/s", "5", courier.CopyPhaseForbidden, ""), "cannot create secrets"), row("z", "ConfigMap/m", "3", synced, "3"),
			row("c", "Secret/s", "5", courier.CopyPhaseUnreachable, ""), row("d", "Secret/s", "", courier.CopyPhaseSourceMissing, ""),
		},
		want: courier.DownstreamCopySummaryStatus{Clusters: 5, ReadyClusters: 0, Copies: 6, SyncedCopies: 1, Failing: 3,
			Phases:  map[string]int32{"Pending": 2, "Forbidden": 1, "Synced": 1, "Unreachable": 1, "SourceMissing": 1},
			Sources: []courier.SummarySource{{Kind: "ConfigMap", Name: "m", ResourceVersion: "3", Copies: 1, SyncedCopies: 1}, {Kind: "Secret", Name: "s", ResourceVersion: "5", Copies: 5}}},
		wantReady: metav1.ConditionFalse, wantReason: ReasonFailing,
		wantNonReady: []string{"app.z.secret.s/Forbidden", "app.c.secret.s/Unreachable", "app.d.secret.s/SourceMissing", "app.a.secret.s/Pending", "app.b.secret.s/Pending"},
		wantMessage: "Forbidden(1) [Cluster ws/z: cannot create secrets]; Unreachable(1) [Cluster ws/c: Unreachable on c]; " +
			"SourceMissing(1) [Cluster ws/d: SourceMissing on d]; Pending(2) [Cluster ws/a: Pending on a; Cluster ws/b: Pending on b]",
	}}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(tc.rows)
			if got.Name != "app" || got.Namespace != "ws" || got.Spec.Owner != helmOpApp {
				t.Errorf("identity: %s/%s owner %v", got.Namespace, got.Name, got.Spec.Owner)
			}
			st := got.Status
			ready := st.Conditions
			nonReady, msg := st.NonReady, st.Message
			st.Conditions, st.NonReady, st.Message = nil, nil, ""
			if !reflect.DeepEqual(st, tc.want) {
				t.Errorf("status:\n got %+v\nwant %+v", st, tc.want)
			}
			if len(ready) != 1 || ready[0].Type != "Ready" || ready[0].Status != tc.wantReady || ready[0].Reason != tc.wantReason || ready[0].Message == "" {
				t.Errorf("conditions = %+v, want Ready %s %s", ready, tc.wantReady, tc.wantReason)
			}
			var names []string
			for _, n := range nonReady {
				names = append(names, n.Name+"/"+string(n.Phase))
			}
			if !reflect.DeepEqual(names, tc.wantNonReady) {
				t.Errorf("nonReady = %q, want %q", names, tc.wantNonReady)
			}
			if msg != tc.wantMessage {
				t.Errorf("message:\n got %q\nwant %q", msg, tc.wantMessage)
			}
		})
	}
}

func TestComputeIdentityAndBounds(t *testing.T) {
	t.Run("a Bundle's summary, its GitRepo, the earliest creation time", func(t *testing.T) {
		r1 := row("a", "Secret/s", "5", courier.CopyPhaseSynced, "5")
		r2 := row("b", "Secret/s", "5", courier.CopyPhaseSynced, "5")
		r1.Owner, r2.Owner = courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: "x"}, courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: "x"}
		r2.GitRepo = "repo"
		r1.CreationTime = metav1.NewTime(t0.Add(time.Hour))
		got := Compute([]Row{r1, r2})
		if got.Name != "bundle:x" || got.Spec.GitRepo != "repo" || !got.CreationTimestamp.Equal(&t0) {
			t.Errorf("name %q gitRepo %q created %v", got.Name, got.Spec.GitRepo, got.CreationTimestamp)
		}
	})
	t.Run("no rows, no summary", func(t *testing.T) {
		if got := Compute(nil); got != nil {
			t.Errorf("Compute(nil) = %+v", got)
		}
	})
	t.Run("25 Forbidden and 20 Pending: 10 listed, incomplete, message bounded", func(t *testing.T) {
		var rows []Row
		long := strings.Repeat("x", 5000)
		for i := 0; i < 25; i++ {
			rows = append(rows, withMessage(row(fmt.Sprintf("c%02d", i), "Secret/s", "5", courier.CopyPhaseForbidden, ""), long))
		}
		for i := 0; i < 20; i++ {
			rows = append(rows, row(fmt.Sprintf("p%02d", i), "Secret/s", "5", courier.CopyPhasePending, ""))
		}
		got := Compute(rows)
		if len(got.Status.NonReady) != MaxNonReady || !got.Status.Incomplete || got.Status.NonReady[0].Cluster != "c00" || got.Status.NonReady[9].Cluster != "c09" {
			t.Errorf("nonReady: %d rows, incomplete %v, first %v", len(got.Status.NonReady), got.Status.Incomplete, got.Status.NonReady[0])
		}
		m := got.Status.Message
		if len(m) > MaxMessage || !strings.HasPrefix(m, "Forbidden(25) [Cluster ws/c00: xxx") || !strings.Contains(m, "; and 22 more]; Pending(20) [Cluster ws/p00: Pending on p00;") {
			t.Errorf("message (%d bytes): %q", len(m), m)
		}
	})
}

func TestCompareRV(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"9", "10", -1}, {"10", "9", 1}, {"10", "10", 0}, {"abc", "abc", 0}, {"abc", "abd", -1}, {"abd", "abc", -1}, {"", "5", -1}} {
		if got := CompareRV(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareRV(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
