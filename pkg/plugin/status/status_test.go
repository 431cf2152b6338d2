package status

import (
	"fmt"
	"strings"
	"testing"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/fixture"
	"github.com/courier-dev/courier/pkg/plugin/grid"
)

// small is the make run example: two Clusters, one source, one Conflict.
func small() fixture.Fleet {
	return fixture.Fleet{Namespace: "fleet-default", HelmOp: "example", Clusters: 2, Sources: 1,
		ClusterName: func(i int) string { return []string{"downstream-1", "downstream-2"}[i] },
		Phase: func(i, j int, c string) (v1alpha1.CopyPhase, string, bool) {
			if i == 1 {
				return v1alpha1.CopyPhaseConflict, "Secret app/source-01 exists in cluster " + c + " and is not managed by Courier; it is left unchanged", false
			}
			return v1alpha1.CopyPhaseSynced, "", false
		}}
}

func render(t testing.TB, f fixture.Fleet, o Options) string {
	rows := f.Rows()
	s := fixture.Summary(f.Namespace, f.HelmOp, rows)
	grids := grid.Build(rows)
	if len(grids) != 1 {
		t.Fatalf("%d grids", len(grids))
	}
	var b strings.Builder
	if err := Owner(&b, &s, grids[0], o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestOwnerGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    fixture.Fleet
		o    Options
	}{
		{"small-80", small(), Options{Width: 80}},
		{"small-80-tty", small(), Options{Width: 80, Color: true}},
		{"small-40", small(), Options{Width: 40}},
		{"large-160", fixture.Large(), Options{Width: 160}},
		{"large-40", fixture.Large(), Options{Width: 40}},
		{"large-160-all", fixture.Large(), Options{Width: 160, All: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := render(t, tc.f, tc.o)
			fixture.Golden(t, "owner-"+tc.name, out)
			if !tc.o.Color {
				if cc := fixture.ControlChars(out); len(cc) > 0 {
					t.Errorf("control characters without colour: %q", cc)
				}
			}
			if tc.o.Width == 40 {
				for _, l := range strings.Split(out, "\n") {
					// Only a single word longer than a line may pass the width.
					if len(l) > 40 && strings.Contains(strings.TrimSpace(l), " ") {
						t.Errorf("line wider than 40 columns: %q", l)
					}
				}
			}
		})
	}
}

func TestOwnersGolden(t *testing.T) {
	a := small().Rows()
	b := fixture.Large().Rows()
	sums := []v1alpha1.DownstreamCopySummary{fixture.Summary("fleet-default", "app", b), fixture.Summary("fleet-default", "example", a)}
	ok := fixture.Fleet{Namespace: "team-b", HelmOp: "web", Clusters: 3, Sources: 2}
	sums = append(sums, fixture.Summary("team-b", "web", ok.Rows()))
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"80", Options{Width: 80, AllNamespaces: true}},
		{"80-tty", Options{Width: 80, AllNamespaces: true, Color: true}},
		{"40", Options{Width: 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if err := Owners(&out, sums, "", tc.o); err != nil {
				t.Fatal(err)
			}
			fixture.Golden(t, "owners-"+tc.name, out.String())
		})
	}
	var out strings.Builder
	if err := Owners(&out, nil, "nowhere", Options{}); err != nil || out.String() != "No owner has copies in namespace nowhere.\n" {
		t.Errorf("no summaries: %q, %v", out.String(), err)
	}
}

// TestLargeStaysReadable: at 1,000 Clusters × 10 sources the matrix of
// every Cluster folds into a page a person reads, not one line per row.
// How fast it is drawn is BenchmarkOwnerLarge's to say
// (docs/benchmarks.md), not a test's.
func TestLargeStaysReadable(t *testing.T) {
	rows := fixture.Large().Rows()
	s := fixture.Summary("fleet-default", "app", rows)
	g := grid.Build(rows)
	var b strings.Builder
	if err := Owner(&b, &s, g[0], Options{Width: 160, All: true}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(b.String(), "\n")
	t.Logf("1,000 x 10, every Cluster: %d lines, %d bytes", lines, b.Len())
	if len(rows) != 10000 || lines > 200 {
		t.Errorf("%d rows drawn in %d lines, want 10,000 rows in at most 200", len(rows), lines)
	}
}

func BenchmarkOwnerLarge(b *testing.B) {
	rows := fixture.Large().Rows()
	s := fixture.Summary("fleet-default", "app", rows)
	for i := 0; i < b.N; i++ {
		g := grid.Build(rows)
		var out strings.Builder
		_ = Owner(&out, &s, g[0], Options{Width: 160})
		fmt.Fprint(&out)
	}
}
