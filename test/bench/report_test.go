package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/courier-dev/courier/test/fleetsim"
)

// roundStats is what one side measured for one kind of change at one N.
type roundStats struct {
	side, kind string
	n          int
	copies     int // copies per round
	// latencies holds one entry per copy and round: from the start of the
	// change to the copy showing the new value downstream.
	latencies []time.Duration
	// makespans holds one entry per round: until the round's last copy
	// landed.
	makespans []time.Duration
}

func (r *roundStats) add(copies int, lat []time.Duration) {
	r.copies = copies
	r.latencies = append(r.latencies, lat...)
	r.makespans = append(r.makespans, fleetsim.MaxDuration(lat))
}

func (r *roundStats) p50() time.Duration { return fleetsim.Percentile(r.latencies, 50) }
func (r *roundStats) p99() time.Duration { return fleetsim.Percentile(r.latencies, 99) }

// medianMakespan is the median (nearest rank) of the rounds' times to
// their last copy.
func (r *roundStats) medianMakespan() time.Duration { return fleetsim.Percentile(r.makespans, 50) }

// copiesPerSecond is the copies of all rounds over the sum of the rounds'
// times to their last copy.
func (r *roundStats) copiesPerSecond() float64 {
	var total time.Duration
	for _, m := range r.makespans {
		total += m
	}
	if total <= 0 {
		return 0
	}
	return float64(r.copies*len(r.makespans)) / total.Seconds()
}

type memoryResult struct {
	// scenario says how Courier ran.
	scenario              string
	secrets, sizeKiB      int
	before, after         int64   // VmRSS bytes, max of the samples
	heapBefore, heapAfter float64 // Go heap in use (go_memstats_heap_inuse_bytes), for the notes
	targetMiB             float64
}

func (m memoryResult) deltaMiB() float64 { return float64(m.after-m.before) / (1 << 20) }

// report is the table TestMain prints at the end, plus notes that help
// explain it.
type report struct {
	mu     sync.Mutex
	scale  []scaleRow
	memory []memoryResult
	pull   []pullResult
	// scaleOut is the scale-out push case (scaleout_test.go).
	scaleOut []scaleOutResult
	// pluginStatus is kubectl courier status (pluginstatus_test.go).
	pluginStatus []pluginStatusResult
	// rest is the at-rest case (rest_test.go).
	rest  []restResult
	notes []string
}

func (r *report) addScale(rows ...scaleRow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scale = append(r.scale, rows...)
}

func (r *report) addMemory(m memoryResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.memory = append(r.memory, m)
}

func (r *report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// ratioAgainst is ratio, with a third decimal when two would print the
// target itself: 0.453 against a target of 0.45 fails, and "0.45 FAIL"
// would not say why.
func ratioAgainst(a, b, target float64) string {
	s := ratio(a, b)
	if b != 0 && a/b != target && s == fmt.Sprintf("%.2f", target) {
		return fmt.Sprintf("%.3f", a/b)
	}
	return s
}

// print writes the table of the scale figures (each with its target and
// PASS or FAIL), the memory row, then the notes that help explain them.
func (r *report) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "=== courier benchmark ===")
	if len(r.scale) > 0 {
		printScale(w, r.scale)
	}
	if len(r.memory) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "memory: Courier\tunrelated Secrets\tRSS before\tRSS after\tdelta\ttarget\tverdict")
		for _, m := range r.memory {
			verdict := "PASS"
			if m.deltaMiB() > m.targetMiB {
				verdict = "FAIL"
			}
			fmt.Fprintf(tw, "%s\t%d x %dKiB\t%.1f MiB\t%.1f MiB\t%.1f MiB\t<= %.0f MiB\t%s\n", m.scenario,
				m.secrets, m.sizeKiB, float64(m.before)/(1<<20), float64(m.after)/(1<<20), m.deltaMiB(), m.targetMiB, verdict)
		}
		tw.Flush()
	}
	if len(r.pull) > 0 {
		printPull(w, r.pull)
	}
	if len(r.scaleOut) > 0 {
		printScaleOut(w, r.scaleOut)
	}
	if len(r.pluginStatus) > 0 {
		printPluginStatus(w, r.pluginStatus)
	}
	if len(r.rest) > 0 {
		printRest(w, r.rest)
	}
	if len(r.notes) > 0 {
		fmt.Fprintln(w, "notes:")
		for _, n := range r.notes {
			fmt.Fprintln(w, "  "+strings.ReplaceAll(n, "\n", "\n  "))
		}
	}
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}
