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
)

// fanoutResult is what one scenario (Courier or a baseline) measured for
// one N.
type fanoutResult struct {
	scenario string
	n        int
	// latencies holds one entry per copy and round: from the upstream
	// update call returning to the copy showing the new value downstream.
	latencies []time.Duration
	// makespans holds one entry per round: until the round's last copy
	// landed.
	makespans []time.Duration
}

func (r *fanoutResult) p50() time.Duration { return percentile(r.latencies, 50) }
func (r *fanoutResult) p99() time.Duration { return percentile(r.latencies, 99) }

func (r *fanoutResult) mean() time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	var total time.Duration
	for _, l := range r.latencies {
		total += l
	}
	return total / time.Duration(len(r.latencies))
}

// copiesPerSecond is N / the mean time until a round's last copy landed.
func (r *fanoutResult) copiesPerSecond() float64 {
	var total time.Duration
	for _, m := range r.makespans {
		total += m
	}
	if total <= 0 {
		return 0
	}
	return float64(r.n*len(r.makespans)) / total.Seconds()
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
	fanout []*fanoutResult
	memory []memoryResult
	notes  []string
}

func (r *report) addFanout(f *fanoutResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fanout = append(r.fanout, f)
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

// print writes the table: per N the Courier row, then each baseline with
// the ratios Courier/baseline (for p50 and p99 above 1 means Courier is
// slower; for copies/s below 1 means Courier is slower).
func (r *report) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "=== courier benchmark ===")
	if len(r.fanout) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\tN\trounds\tp50\tp99\tcopies/s\tratio(p50)\tratio(p99)\tratio(copies/s)")
		var courierRow *fanoutResult
		for _, f := range r.fanout {
			rp50, rp99, rcps := "-", "-", "-"
			if f.scenario == scenarioCourier {
				courierRow = f
			} else if courierRow != nil && courierRow.n == f.n {
				rp50 = ratio(float64(courierRow.p50()), float64(f.p50()))
				rp99 = ratio(float64(courierRow.p99()), float64(f.p99()))
				rcps = ratio(courierRow.copiesPerSecond(), f.copiesPerSecond())
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%.1f\t%s\t%s\t%s\n", f.scenario, f.n, len(f.makespans),
				ms(f.p50()), ms(f.p99()), f.copiesPerSecond(), rp50, rp99, rcps)
		}
		tw.Flush()
		fmt.Fprintln(w, "ratio = courier / baseline of the same N: above 1 for p50/p99, below 1 for copies/s, means Courier is slower.")
		fmt.Fprintln(w, "p50/p99: nearest rank over N x rounds per-copy latencies; copies/s: N x rounds / sum of the rounds' times to their last copy.")
		fmt.Fprintf(w, "%q is a diagnostic row, not a baseline: the x4 loop reading each copy before updating it, as Courier does.\n", scenarioPoolGet)
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
