package report

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
	"github.com/courier-dev/courier/pkg/plugin/fixture"
	"github.com/courier-dev/courier/pkg/plugin/grid"
)

var taken = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func page(t testing.TB, f fixture.Fleet) string {
	rows := f.Rows()
	var b strings.Builder
	if err := Write(&b, Input{Taken: taken, Where: `context "admin", namespace ` + f.Namespace,
		Summaries: []v1alpha1.DownstreamCopySummary{fixture.Summary(f.Namespace, f.HelmOp, rows)}, Grids: grid.Build(rows)}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSmallGolden(t *testing.T) {
	f := fixture.Fleet{Namespace: "fleet-default", HelmOp: "example", Clusters: 2, Sources: 1,
		ClusterName: func(i int) string { return []string{"downstream-1", "downstream-2"}[i] },
		Phase: func(i, j int, c string) (v1alpha1.CopyPhase, string, bool) {
			if i == 1 {
				return v1alpha1.CopyPhaseConflict, `Secret app/x exists in cluster ` + c + ` and is not managed by Courier; <it> is "left" unchanged`, false
			}
			return v1alpha1.CopyPhaseSynced, "", false
		}}
	fixture.Golden(t, "small.html", page(t, f))
}

// TestSelfContained: nothing in the page fetches anything: no URL, no
// src or href but in-page anchors, and a CSP forbidding every fetch.
func TestSelfContained(t *testing.T) {
	p := page(t, fixture.Large())
	for _, bad := range []string{"http://", "https://", "src=", "<link", "@import", "url("} {
		if strings.Contains(p, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	for _, href := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(p, -1) {
		if !strings.HasPrefix(href[1], "#") {
			t.Errorf("href %q leaves the page", href[1])
		}
	}
	if !strings.Contains(p, `content="default-src 'none'`) {
		t.Error("no Content-Security-Policy")
	}
}

// TestLargeSizeAndTime: 1,000 Clusters × 10 sources, one cell per row.
func TestLargeSizeAndTime(t *testing.T) {
	f := fixture.Large()
	rows := f.Rows()
	began := time.Now()
	p := page(t, f)
	took := time.Since(began)
	cells := len(regexp.MustCompile(`<td class=p\d+`).FindAllString(p, -1)) - strings.Count(p, "<td class="+Class(cellstate.None)+">")
	t.Logf("1,000 x 10: %d bytes (%.0f KiB), written in %v", len(p), float64(len(p))/1024, took)
	if cells != len(rows) {
		t.Errorf("%d cells with a phase, want one per row: %d", cells, len(rows))
	}
	if len(p) > 400<<10 {
		t.Errorf("page is %d bytes", len(p))
	}
}

func BenchmarkLarge(b *testing.B) {
	f := fixture.Large()
	for i := 0; i < b.N; i++ {
		page(b, f)
	}
}
