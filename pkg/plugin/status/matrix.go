package status

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
	"github.com/courier-dev/courier/pkg/plugin/grid"
)

// maxGroups is the most causes listed under the matrix.
const maxGroups = 20

// Owner writes one owner: its summary line, its sources, the Clusters ×
// sources matrix (one character per copy; Clusters side by side as in
// `ls` when the terminal is wide, only the Clusters not ready beyond
// FullMatrixClusters unless All), the legend, and the rows not ready
// grouped by cause.
func Owner(w io.Writer, s *v1alpha1.DownstreamCopySummary, g *grid.Grid, o Options) error {
	var b strings.Builder
	header(&b, s, o)
	sources(&b, s, g, o)
	matrix(&b, g, o)
	legend(&b, o)
	notReady(&b, g, o)
	_, err := io.WriteString(w, b.String())
	return err
}

func header(b *strings.Builder, s *v1alpha1.DownstreamCopySummary, o Options) {
	ready := readyCondition(s)
	word, st := "Ready", cellstate.Synced
	if ready.Status != metav1.ConditionTrue {
		word, st = "Not ready", cellstate.Pending
		if s.Status.Failing > 0 {
			st = cellstate.Forbidden
		}
	}
	lines := wrap(fmt.Sprintf("%s %q in %s: %s (%s)", s.Spec.Owner.Kind, s.Spec.Owner.Name, s.Namespace, word, ready.Reason), "", o.width())
	last := len(lines) - 1
	i := strings.LastIndex(lines[last], word)
	if i < 0 { // the word was cut over two lines: leave it unpainted
		i = len(lines[last])
	}
	lines[last] = lines[last][:i] + strings.Replace(lines[last][i:], word, o.paint(st, word), 1)
	para(b, lines)
	para(b, wrap(fmt.Sprintf("Clusters ready %d/%d, copies synced %d/%d, failing %d",
		s.Status.ReadyClusters, s.Status.Clusters, s.Status.SyncedCopies, s.Status.Copies, s.Status.Failing), "  ", o.width()))
	if ready.Status != metav1.ConditionTrue && (ready.Reason == "SourceChanged" || ready.Reason == "SourceUnknown") {
		para(b, wrap(ready.Message, "  ", o.width()))
	}
}

// para writes lines.
func para(b *strings.Builder, lines []string) {
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}

// sources lists the columns with their number, current version and
// progress (from the summary, whose versions are floored by a live read).
func sources(b *strings.Builder, s *v1alpha1.DownstreamCopySummary, g *grid.Grid, o Options) {
	b.WriteString("\nSources:\n")
	progress := map[grid.Source]v1alpha1.SummarySource{}
	for _, src := range s.Status.Sources {
		progress[grid.Source{Kind: src.Kind, Name: src.Name}] = src
	}
	for i, src := range g.Sources {
		p, ok := progress[src]
		line := fmt.Sprintf("%2d %s", i+1, src)
		switch {
		case !ok:
		case p.ResourceVersion == "":
			line += fmt.Sprintf(" (missing), %d/%d synced", p.SyncedCopies, p.Copies)
		default:
			line += fmt.Sprintf(" rv %s, %d/%d synced", p.ResourceVersion, p.SyncedCopies, p.Copies)
		}
		para(b, wrap(line, "  ", o.width()))
	}
}

// matrix draws the Clusters in newspaper columns: each entry is the
// Cluster's name and one character per source.
func matrix(b *strings.Builder, g *grid.Grid, o Options) {
	shown := make([]int, 0, len(g.Clusters))
	hidden := 0
	for i := range g.Clusters {
		if o.All || len(g.Clusters) <= FullMatrixClusters || !g.ClusterReady(i) {
			shown = append(shown, i)
		} else {
			hidden++
		}
	}
	b.WriteString("\n")
	for _, l := range wrap("Clusters x sources (one character per copy, sources numbered as above):", "", o.width()) {
		b.WriteString(l + "\n")
	}
	nameW := 0
	for _, i := range shown {
		nameW = max(nameW, len(g.Clusters[i]))
	}
	width := o.width()
	nameW = min(nameW, 32, max(8, width-3-len(g.Sources)))
	entry := 2 + nameW + 1 + len(g.Sources)
	cols := max(1, (width+2)/(entry+2))
	rows := (len(shown) + cols - 1) / cols
	colHeader(b, g, nameW, cols, min(cols, len(shown)))
	for r := 0; r < rows; r++ {
		var line strings.Builder
		for c := 0; c < cols; c++ {
			k := c*rows + r
			if k >= len(shown) {
				break
			}
			i := shown[k]
			if c > 0 {
				line.WriteString("  ")
			}
			fmt.Fprintf(&line, "  %-*s %s", nameW, fit(g.Clusters[i], nameW), cells(g.Cells[i], o))
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	if hidden > 0 {
		para(b, wrap(fmt.Sprintf("... and %d more Clusters with every copy synced (--all shows them)", hidden), "  ", o.width()))
	}
}

// colHeader numbers the source columns over each newspaper column: the
// tens on a line of their own when there are more than 9 sources.
func colHeader(b *strings.Builder, g *grid.Grid, nameW, cols, used int) {
	digits := func(f func(n int) byte) string {
		var s strings.Builder
		for j := range g.Sources {
			s.WriteByte(f(j + 1))
		}
		return s.String()
	}
	lines := []string{digits(func(n int) byte { return byte('0' + n%10) })}
	if len(g.Sources) > 9 {
		tens := digits(func(n int) byte {
			if n < 10 {
				return ' '
			}
			return byte('0' + (n/10)%10)
		})
		lines = append([]string{tens}, lines...)
	}
	for _, d := range lines {
		var line strings.Builder
		for c := 0; c < used; c++ {
			if c > 0 {
				line.WriteString("  ")
			}
			fmt.Fprintf(&line, "  %-*s %s", nameW, "", d)
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

// cells draws one Cluster's cells, one colour code per run of a state.
func cells(cs []grid.Cell, o Options) string {
	var s strings.Builder
	for j := 0; j < len(cs); {
		k := j
		for k < len(cs) && cs[k].State == cs[j].State {
			k++
		}
		s.WriteString(o.paint(cs[j].State, strings.Repeat(string(cellstate.StyleOf(cs[j].State).Char), k-j)))
		j = k
	}
	return s.String()
}

// legend says what each character means, folded to the width.
func legend(b *strings.Builder, o Options) {
	b.WriteString("\nLegend:\n")
	line := ""
	for _, st := range cellstate.All {
		style := cellstate.StyleOf(st)
		item := fmt.Sprintf("'%c' %s", style.Char, style.Meaning)
		if line != "" && len(line)+3+len(item) > o.width() {
			b.WriteString(line + "\n")
			line = ""
		}
		if line == "" {
			line = "  "
		} else {
			line += "   "
		}
		line += o.paint(st, item)
	}
	b.WriteString(line + "\n")
}

// notReady lists the rows not ready, grouped by cause.
func notReady(b *strings.Builder, g *grid.Grid, o Options) {
	groups := g.NotReady()
	if len(groups) == 0 {
		return
	}
	n := 0
	for _, gr := range groups {
		n += len(gr.Rows)
	}
	fmt.Fprintf(b, "\nNot ready (%s, %s):\n", plural(n, "copy", "copies"), plural(len(groups), "cause", "causes"))
	for k, gr := range groups {
		if k == maxGroups {
			para(b, wrap(fmt.Sprintf("... and %d more causes (kubectl get dcp -n %s --field-selector %s)",
				len(groups)-maxGroups, g.Namespace, g.Owner.Rows().String()+",status.phase!=Synced"), "  ", o.width()))
			break
		}
		head := wrap(string(gr.State)+" "+who(gr), "  ", o.width())
		head[0] = strings.Replace(head[0], string(gr.State), o.paint(gr.State, string(gr.State)), 1)
		b.WriteString(strings.Join(head, "\n") + "\n")
		msg := gr.Message
		if gr.State == cellstate.OutOfDate && msg == "" || len(gr.Rows) > 1 && gr.State == cellstate.OutOfDate {
			msg = "Synced at an older resourceVersion than the source's current one: the new version is not copied yet"
		}
		for _, l := range wrap(msg, "      ", o.width()) {
			b.WriteString(l + "\n")
		}
	}
}

// who names a group's rows: the row's Cluster and source for one, the
// number of Clusters (the first three named) for many.
func who(gr grid.Group) string {
	if len(gr.Rows) == 1 {
		r := gr.Rows[0]
		return fmt.Sprintf("Cluster %s, %s/%s (%s):", r.Spec.Cluster, r.Spec.Source.Kind, r.Spec.Source.Name, r.Name)
	}
	names := gr.Clusters
	more := ""
	if len(names) > 3 {
		more = fmt.Sprintf(" and %d more", len(names)-3)
		names = names[:3]
	}
	what := fmt.Sprintf("%d Clusters", len(gr.Clusters))
	if len(gr.Rows) != len(gr.Clusters) {
		what = fmt.Sprintf("%d copies in %d Clusters", len(gr.Rows), len(gr.Clusters))
	}
	return fmt.Sprintf("%s (%s%s):", what, strings.Join(names, ", "), more)
}

// plural is n and the word for it.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
