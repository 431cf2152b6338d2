package chaos

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
)

// table is the one table the run prints: a row per figure, with the
// condition it must meet and whether it did.
type table struct {
	mu    sync.Mutex
	rows  [][5]string
	notes []string
}

// add records a figure. ok false also fails t: every condition here is a
// "nothing lost" condition of docs/reliability.md. An empty condition is information.
func (r *table) add(t *testing.T, scenario, figure, value, condition string, ok bool) {
	t.Helper()
	verdict := "PASS"
	if condition == "" {
		verdict = "-"
	} else if !ok {
		verdict = "FAIL"
		t.Errorf("%s: %s = %s, want %s", scenario, figure, value, condition)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, [5]string{scenario, figure, value, condition, verdict})
}

func (r *table) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *table) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(w, "\n=== chaos: results")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "| scenario\t| figure\t| value\t| condition\t| verdict\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|")
	for _, row := range r.rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintln(tw, "| "+strings.Join(cells[:], "\t| ")+"\t|")
	}
	tw.Flush()
	for _, n := range r.notes {
		fmt.Fprintln(w, "- "+n)
	}
}
