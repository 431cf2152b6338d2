package report

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
	"github.com/courier-dev/courier/pkg/plugin/fixture"
	"github.com/courier-dev/courier/pkg/plugin/grid"
)

// wantColor is each phase's cell colour as the docs and the legend promise
// it, written here independently of cellstate: a colour changed or
// swapped there by mistake fails this test.
var wantColor = map[cellstate.State]string{
	cellstate.Forbidden: "#d7263d", cellstate.Conflict: "#a4036f", cellstate.Denied: "#7b0d1e",
	cellstate.Invalid: "#e07a00", cellstate.Unreachable: "#5c5c5c", cellstate.SourceMissing: "#c9a227",
	cellstate.Pending: "#3aa7d6", cellstate.OutOfDate: "#3b5bdb", cellstate.Synced: "#2b9348",
	cellstate.Deleting: "#b0b0b0", cellstate.Kept: "#8d99ae", cellstate.None: "#ffffff",
}

// rgb is how getComputedStyle writes a #rrggbb colour.
func rgb(hex string) string {
	v, _ := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	return fmt.Sprintf("rgb(%d, %d, %d)", v>>16, (v>>8)&0xff, v&0xff)
}

// browser finds chromium: $COURIER_BROWSER (what make test passes from
// hack/install-browser.sh), else chromium on PATH. Without one the test
// fails in CI (CI=true) and is skipped elsewhere.
func browser(t *testing.T) string {
	if p := os.Getenv("COURIER_BROWSER"); p != "" {
		return p
	}
	for _, b := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium: the browser test must run in CI (hack/install-browser.sh installs it; make test runs it)")
	}
	t.Skip("no chromium (hack/install-browser.sh installs it; in CI this test fails instead)")
	return ""
}

// everyPhase is a fleet of n Clusters × 6 sources showing every state:
// Cluster i's source j cycles through the phases, with Cluster 0 all
// synced and one Cluster without one source (a None cell).
func everyPhase(n int) (fixture.Fleet, func(i, j int) cellstate.State) {
	phases := []v1alpha1.CopyPhase{"Forbidden", "Conflict", "Denied", "Invalid", "Unreachable", "SourceMissing", "Pending", "Synced", "Synced", "Deleting", "Kept"}
	state := func(i, j int) (v1alpha1.CopyPhase, bool) {
		if i == 0 || (i*7+j)%3 == 0 {
			return v1alpha1.CopyPhaseSynced, false
		}
		k := (i + j) % len(phases)
		return phases[k], k == 8 // the second Synced is out of date
	}
	f := fixture.Fleet{Namespace: "fleet-default", HelmOp: "example", Clusters: n, Sources: 6,
		Phase: func(i, j int, c string) (v1alpha1.CopyPhase, string, bool) {
			p, old := state(i, j)
			msg := ""
			if p != v1alpha1.CopyPhaseSynced {
				msg = fmt.Sprintf("%s message for cluster %s", p, c)
			}
			return p, msg, old
		}}
	return f, func(i, j int) cellstate.State {
		p, old := state(i, j)
		if old {
			return cellstate.OutOfDate
		}
		return cellstate.State(p)
	}
}

// writePage writes the report of rows (less the rows drop says) to dir.
func writePage(t *testing.T, dir, name string, rows []v1alpha1.DownstreamCopy) string {
	var b strings.Builder
	if err := Write(&b, Input{Taken: taken, Where: `context "admin", namespace fleet-default`,
		Summaries: []v1alpha1.DownstreamCopySummary{fixture.Summary("fleet-default", "example", rows)}, Grids: grid.Build(rows)}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// session is a headless chromium tab that records console errors,
// exceptions, log errors and every network request.
type session struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	requests []string
}

func newSession(t *testing.T, exe string) *session {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1200, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	s := &session{ctx: ctx}
	// Open the tab first, so that the listener misses nothing of the page.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	listen := func(ev any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				s.problems = append(s.problems, "console."+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			s.problems = append(s.problems, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				s.problems = append(s.problems, "log: "+e.Entry.Text)
			}
		case *network.EventRequestWillBeSent:
			s.requests = append(s.requests, e.Request.URL)
		}
	}
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatal(err)
	}
	enable := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
		return err
	})
	if err := chromedp.Do(ctx, enable); err != nil {
		t.Fatalf("enabling the network and log domains: %v", err)
	}
	return s
}

// open loads path from file:// and returns how long until the load event.
func (s *session) open(t *testing.T, path string) time.Duration {
	began := time.Now()
	if err := chromedp.Do(s.ctx, chromedp.Navigate("file://"+path), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatal(err)
	}
	return time.Since(began)
}

// check: no console error, no exception, and no request but the page's own.
func (s *session) check(t *testing.T, page string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Errorf("%s", p)
	}
	for _, r := range s.requests {
		if r != "file://"+page {
			t.Errorf("network request from the page: %s", r)
		}
	}
	s.problems, s.requests = nil, nil
}

const cellsJS = `Array.from(document.querySelectorAll('table.grid tbody tr')).map(function(r){
  return [r.firstChild.textContent].concat(Array.from(r.querySelectorAll('td')).map(function(c){return getComputedStyle(c).backgroundColor;}));
})`

const legendJS = `Array.from(document.querySelectorAll('.legend span')).map(function(s){
  return [s.dataset.phase, getComputedStyle(s.querySelector('i')).backgroundColor, s.textContent];
})`

// TestReportInBrowser opens the report in headless chromium from file://:
// no console error and no network request; one grid cell per row, each
// of its phase's colour; the legend names every phase in that colour; the
// "only Clusters not ready" filter works; and a screenshot is written to
// _output/kubectl-courier-report.png for docs/kubectl-courier.md. It also
// loads the 1,000 × 10 page and logs how long that takes.
func TestReportInBrowser(t *testing.T) {
	exe := browser(t)
	s := newSession(t, exe)
	dir := t.TempDir()

	f, want := everyPhase(24)
	rows := f.Rows()
	rows = rows[1:] // c0001 has no row for source-01: a None cell
	page := writePage(t, dir, "report.html", rows)
	s.open(t, page)
	s.check(t, page)

	cells, err := chromedp.Run(s.ctx, chromedp.Evaluate[[][]string](cellsJS))
	if err != nil {
		t.Fatal(err)
	}
	legend, err := chromedp.Run(s.ctx, chromedp.Evaluate[[][]string](legendJS))
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != f.Clusters {
		t.Fatalf("%d grid rows, want %d Clusters", len(cells), f.Clusters)
	}
	seen := map[cellstate.State]bool{}
	for i, r := range cells {
		if len(r) != 1+f.Sources {
			t.Fatalf("Cluster %s: %d cells, want %d", r[0], len(r)-1, f.Sources)
		}
		for j, got := range r[1:] {
			st := want(i, j)
			if i == 0 && j == 0 {
				st = cellstate.None
			}
			seen[st] = true
			if w := rgb(wantColor[st]); got != w {
				t.Errorf("Cluster %s source %d (%s): colour %s, want %s", r[0], j+1, st, got, w)
			}
		}
	}
	if len(seen) != len(wantColor) {
		t.Errorf("the fixture showed %d states, want every one of %d", len(seen), len(wantColor))
	}
	inLegend := map[string]bool{}
	for _, l := range legend {
		st := cellstate.State(l[0])
		inLegend[l[0]] = true
		if w, ok := wantColor[st]; !ok || l[1] != rgb(w) || !strings.HasPrefix(l[2], l[0]+": ") {
			t.Errorf("legend entry %q: colour %s, want %s", l[2], l[1], rgb(w))
		}
	}
	for st := range wantColor {
		if !inLegend[string(st)] {
			t.Errorf("the legend lacks %s", st)
		}
	}

	// The filter: only the Clusters not ready stay visible.
	g := grid.Build(rows)[0]
	notReady := 0
	for i := range g.Clusters {
		if !g.ClusterReady(i) {
			notReady++
		}
	}
	if err := chromedp.Do(s.ctx, chromedp.Click(chromedp.CSS("input.notready"))); err != nil {
		t.Fatal(err)
	}
	visible, err := chromedp.Run(s.ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll('table.grid tbody tr')).filter(function(r){return r.offsetParent!==null;}).length`))
	if err != nil {
		t.Fatal(err)
	}
	if visible != notReady || notReady == 0 || notReady == f.Clusters {
		t.Errorf("%d rows visible with only not ready, want %d of %d", visible, notReady, f.Clusters)
	}
	if err := chromedp.Do(s.ctx, chromedp.Click(chromedp.CSS("input.notready"))); err != nil {
		t.Fatal(err)
	}

	png, err := chromedp.Run(s.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join("..", "..", "..", "_output")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "kubectl-courier-report.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	s.check(t, page)

	large := writePage(t, dir, "large.html", fixture.Large().Rows())
	took := s.open(t, large)
	n, err := chromedp.Run(s.ctx, chromedp.Evaluate[int](`document.querySelectorAll('table.grid td').length`))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(large)
	t.Logf("1,000 x 10 page: %d bytes, loaded and laid out in %v, %d cells", st.Size(), took, n)
	if n != 10000 {
		t.Errorf("%d cells on the large page, want 10000", n)
	}
	s.check(t, large)
}
