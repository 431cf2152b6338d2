// Package status draws `kubectl courier status`: one line per owner, or
// one owner's Clusters × sources matrix with a legend and the rows that
// are not ready grouped by cause. Output is plain text; colours only when
// Options.Color (the command sets it on a terminal only).
package status

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
)

// Owners writes one line per summary: the owner, Clusters ready/total,
// copies synced/total, failing, and the phases of the rest (or Ready).
func Owners(w io.Writer, summaries []v1alpha1.DownstreamCopySummary, namespace string, o Options) error {
	if len(summaries) == 0 {
		where := "in any namespace"
		if namespace != "" {
			where = fmt.Sprintf("in namespace %s", namespace)
		}
		_, err := fmt.Fprintf(w, "No owner has copies %s.\n", where)
		return err
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	if o.AllNamespaces {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "OWNER\tCLUSTERS\tCOPIES\tFAILING\tSTATUS")
	for i := range summaries {
		s := &summaries[i]
		if o.AllNamespaces {
			fmt.Fprintf(tw, "%s\t", s.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d/%d\t%d\t%s\n", s.Name, s.Status.ReadyClusters, s.Status.Clusters,
			s.Status.SyncedCopies, s.Status.Copies, s.Status.Failing, "\x00"+fmt.Sprint(i))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The STATUS cell goes in after the alignment, so that its colour codes
	// do not count as width, and it is cut to the terminal's width.
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		pre, idx, ok := strings.Cut(line, "\x00")
		if !ok {
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
			continue
		}
		var i int
		fmt.Sscan(strings.TrimSpace(idx), &i)
		room := o.width() - len(pre)
		if room < 8 {
			room = 8
		}
		if _, err := fmt.Fprintln(w, pre+statusCell(&summaries[i], room, o)); err != nil {
			return err
		}
	}
	return nil
}

// statusCell is Ready, or the phases of the rows not synced, most severe
// first, with the reason the summary is not Ready when no row says it
// (a source changed since the rows were computed).
func statusCell(s *v1alpha1.DownstreamCopySummary, room int, o Options) string {
	ready := readyCondition(s)
	if ready.Status == metav1.ConditionTrue {
		return o.paint(cellstate.Synced, "Ready")
	}
	type part struct {
		st   cellstate.State
		text string
	}
	var parts []part
	for _, st := range cellstate.All {
		if n := s.Status.Phases[string(st)]; n > 0 && st != cellstate.Synced && !cellstate.Leftover(st) {
			parts = append(parts, part{st, fmt.Sprintf("%s(%d)", st, n)})
		}
	}
	if out := s.Status.Copies - s.Status.SyncedCopies - sumNotSynced(s); out > 0 {
		parts = append(parts, part{cellstate.OutOfDate, fmt.Sprintf("%s(%d)", cellstate.OutOfDate, out)})
	}
	if len(parts) == 0 && ready.Reason != "" {
		parts = append(parts, part{cellstate.Pending, ready.Reason})
	}
	sort.SliceStable(parts, func(i, j int) bool { return cellstate.Rank(parts[i].st) < cellstate.Rank(parts[j].st) })
	var painted []string
	used := 0
	for i, p := range parts {
		if used+len(p.text)+1 > room && i > 0 {
			painted = append(painted, "...")
			break
		}
		used += len(p.text) + 1
		painted = append(painted, o.paint(p.st, p.text))
	}
	if len(painted) == 0 {
		return "NotReady"
	}
	return strings.Join(painted, " ")
}

// sumNotSynced counts the wanted rows whose phase is not Synced.
func sumNotSynced(s *v1alpha1.DownstreamCopySummary) int32 {
	var n int32
	for phase, c := range s.Status.Phases {
		st := cellstate.State(phase)
		if st != cellstate.Synced && !cellstate.Leftover(st) {
			n += c
		}
	}
	return n
}

// readyCondition returns the summary's Ready condition.
func readyCondition(s *v1alpha1.DownstreamCopySummary) metav1.Condition {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown}
}
