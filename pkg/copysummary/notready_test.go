package copysummary

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// sortedNotReady is the reference the bounded selection must match: every
// not-ready row, fully sorted by severity, Cluster and row name (the order
// status.nonReady and status.message are defined by), written out here
// independently of notReadyGroups.
func sortedNotReady(rows []Row, synced func(Row) bool) []Row {
	var out []Row
	for _, r := range rows {
		if !Leftover(r.Phase) && !synced(r) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(severity(a.Phase, a.Phase == courier.CopyPhaseSynced), severity(b.Phase, b.Phase == courier.CopyPhaseSynced)),
			strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Name, b.Name))
	})
	return out
}

// referenceMessage is status.message from the fully sorted rows.
func referenceMessage(namespace string, sorted []Row) string {
	var groups []notReadyGroup
	for _, r := range sorted {
		if n := len(groups); n == 0 || groups[n-1].label != groupLabel(r) {
			groups = append(groups, notReadyGroup{label: groupLabel(r)})
		}
		g := &groups[len(groups)-1]
		g.count++
		if len(g.first) < examplesPerPhase {
			g.first = append(g.first, r)
		}
	}
	return message(namespace, groups)
}

// randomRows are n rows of one owner over a few Clusters and sources, in
// every phase, at current and older versions, in random order.
func randomRows(rnd *rand.Rand, n int) []Row {
	phases := []courier.CopyPhase{courier.CopyPhaseSynced, courier.CopyPhaseSynced, courier.CopyPhaseSynced, courier.CopyPhasePending,
		courier.CopyPhaseForbidden, courier.CopyPhaseConflict, courier.CopyPhaseUnreachable, courier.CopyPhaseSourceMissing, courier.CopyPhaseKept}
	rows := make([]Row, n)
	for i := range rows {
		cluster := "c" + strconv.Itoa(rnd.IntN(n/4+1))
		source := "Secret/s" + strconv.Itoa(rnd.IntN(5))
		rv := strconv.Itoa(10 + rnd.IntN(2))
		rows[i] = row(cluster, source, "11", phases[rnd.IntN(len(phases))], rv)
		rows[i].Name += "-" + strconv.Itoa(i) // names unique, as row names are
	}
	return rows
}

// TestNotReadyMatchesAFullSort: for random sets of rows, status.nonReady,
// incomplete and status.message are what a full sort of the not-ready rows
// gives.
func TestNotReadyMatchesAFullSort(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, 12, 40, 300, 2000} {
		for trial := range 5 {
			t.Run(fmt.Sprintf("%d rows, trial %d", n, trial), func(t *testing.T) {
				rows := randomRows(rnd, n)
				if n == 0 {
					rows = []Row{row("a", "Secret/s", "11", courier.CopyPhaseSynced, "11")}
				}
				got := Compute(rows)
				// The newest version is "11" in every source randomRows makes.
				sorted := sortedNotReady(rows, func(r Row) bool { return r.Phase == courier.CopyPhaseSynced && r.SyncedRV == "11" })
				var want []string
				for _, r := range sorted[:min(len(sorted), MaxNonReady)] {
					want = append(want, r.Name+"/"+string(r.Phase))
				}
				var names []string
				for _, nr := range got.Status.NonReady {
					names = append(names, nr.Name+"/"+string(nr.Phase))
				}
				if !reflect.DeepEqual(names, want) {
					t.Errorf("nonReady = %v, want %v", names, want)
				}
				if got.Status.Incomplete != (len(sorted) > MaxNonReady) {
					t.Errorf("incomplete = %v with %d not ready", got.Status.Incomplete, len(sorted))
				}
				if wantMsg := referenceMessage("ws", sorted); got.Status.Message != wantMsg {
					t.Errorf("message = %q\nwant      %q", got.Status.Message, wantMsg)
				}
			})
		}
	}
}

// BenchmarkCompute10000 is one owner's summary over 10,000 rows in the
// middle of a change of every source (half of them synced at the new
// version), beside the full sort of the not-ready rows it replaced:
// go test -run '^$' -bench Compute10000 ./pkg/copysummary
func BenchmarkCompute10000(b *testing.B) {
	rows := make([]Row, 10000)
	for i := range rows {
		rv := "10"
		if i%2 == 0 {
			rv = "11"
		}
		rows[i] = row("c"+strconv.Itoa(i/10), "Secret/s"+strconv.Itoa(i%10), "11", courier.CopyPhaseSynced, rv)
	}
	b.Run("Compute", func(b *testing.B) {
		for b.Loop() {
			Compute(rows)
		}
	})
	b.Run("full sort of the not-ready rows (the replaced way)", func(b *testing.B) {
		for b.Loop() {
			sortedNotReady(slices.Clone(rows), func(r Row) bool { return r.SyncedRV == "11" })
		}
	})
}
