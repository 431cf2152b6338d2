// Package report writes `kubectl courier report -o html`: one
// self-contained page (inline CSS and a little inline JavaScript, no
// external script, style, font or image, and a Content-Security-Policy
// that forbids fetching any) with the owners, each owner's Clusters ×
// sources grid coloured by phase, the copies not ready grouped by cause,
// and when it was taken. At 1,000 Clusters × 10 sources it stays small
// (one short table cell per copy, a title only on cells not ready).
package report

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
	"github.com/courier-dev/courier/pkg/plugin/grid"
)

// Input is what the page shows.
type Input struct {
	// Taken is when the rows were read.
	Taken time.Time
	// Where says what was read, e.g. `context "admin", namespace fleet-default`.
	Where     string
	Summaries []v1alpha1.DownstreamCopySummary
	Grids     []*grid.Grid
}

// Class is the CSS class of a cell in state st: p<index in cellstate.All>.
func Class(st cellstate.State) string {
	for i, s := range cellstate.All {
		if s == st {
			return fmt.Sprintf("p%d", i)
		}
	}
	return "pu"
}

// Write writes the page.
func Write(w io.Writer, in Input) error {
	var b strings.Builder
	b.Grow(200 + 16*countRows(in.Grids))
	head(&b)
	fmt.Fprintf(&b, "<h1>Courier: where every copy stands</h1>\n<p class=taken>Taken <time datetime=\"%s\">%s</time> from %s.</p>\n",
		in.Taken.UTC().Format(time.RFC3339), in.Taken.UTC().Format("2006-01-02 15:04:05 MST"), html.EscapeString(in.Where))
	owners(&b, in)
	legend(&b)
	for i, g := range in.Grids {
		section(&b, i, g)
	}
	b.WriteString(script)
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func countRows(gs []*grid.Grid) int {
	n := 0
	for _, g := range gs {
		n += g.Rows
	}
	return n
}

func head(b *strings.Builder) {
	b.WriteString(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Courier report</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse}
.owners td,.owners th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}
.grid{font:11px monospace}
.grid th{text-align:right;padding:0 6px 0 0;font-weight:normal;white-space:nowrap}
.grid thead th{text-align:center;padding:0}
.grid td{width:14px;height:14px;padding:0;border:1px solid #fff}
.legend span{display:inline-block;margin:2px 12px 2px 0}
.legend i{display:inline-block;width:12px;height:12px;vertical-align:middle;margin-right:4px;border:1px solid #999}
.cause{margin:.5em 0}
.cause code{white-space:pre-wrap}
.hide{display:none}
#tip{position:fixed;bottom:0;left:0;right:0;background:#222;color:#fff;padding:4px 8px;font:12px monospace;min-height:1.4em}
`)
	for _, st := range cellstate.All {
		fmt.Fprintf(b, ".%s{background:%s}\n", Class(st), cellstate.StyleOf(st).CSS)
	}
	b.WriteString("</style>\n</head>\n<body>\n")
}

func owners(b *strings.Builder, in Input) {
	b.WriteString("<table class=owners>\n<thead><tr><th>Namespace<th>Owner<th>Clusters ready<th>Copies synced<th>Failing<th>Status</thead>\n<tbody>\n")
	for _, s := range in.Summaries {
		status := "Ready"
		for _, c := range s.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady && c.Status != "True" {
				status = "Not ready (" + c.Reason + ")"
			}
		}
		fmt.Fprintf(b, "<tr><td>%s<td><a href=\"#%s\">%s</a><td>%d/%d<td>%d/%d<td>%d<td>%s\n", html.EscapeString(s.Namespace),
			anchor(s.Namespace, s.Name), html.EscapeString(s.Name), s.Status.ReadyClusters, s.Status.Clusters,
			s.Status.SyncedCopies, s.Status.Copies, s.Status.Failing, html.EscapeString(status))
	}
	b.WriteString("</tbody></table>\n")
}

func anchor(ns, name string) string {
	return "o-" + strings.NewReplacer(":", "-", ".", "-", "/", "-").Replace(ns+"/"+name)
}

func legend(b *strings.Builder) {
	b.WriteString("<p class=legend>")
	for _, st := range cellstate.All {
		fmt.Fprintf(b, "<span data-phase=%q><i class=%s></i>%s</span>", string(st), Class(st), html.EscapeString(string(st)+": "+cellstate.StyleOf(st).Meaning))
	}
	b.WriteString("</p>\n")
}

// section writes one owner's grid: a row per Cluster, a column per source,
// and the copies not ready by cause.
func section(b *strings.Builder, i int, g *grid.Grid) {
	fmt.Fprintf(b, "<section id=\"%s\">\n<h2>%s %s in %s</h2>\n", anchor(g.Namespace, g.Owner.SummaryName()),
		html.EscapeString(string(g.Owner.Kind)), html.EscapeString(g.Owner.Name), html.EscapeString(g.Namespace))
	fmt.Fprintf(b, "<p><label><input type=checkbox class=notready> only Clusters not ready</label> <input type=search class=filter placeholder=\"filter Clusters\"> %d Clusters × %d sources, %d copies</p>\n",
		len(g.Clusters), len(g.Sources), g.Rows)
	fmt.Fprintf(b, "<table class=grid id=g%d>\n<thead><tr><th>Cluster", i)
	for j, s := range g.Sources {
		fmt.Fprintf(b, "<th title=\"%s\">%d", html.EscapeString(s.String()), j+1)
	}
	b.WriteString("</thead>\n<tbody>\n")
	for ci, c := range g.Clusters {
		if g.ClusterReady(ci) {
			b.WriteString("<tr class=r><th>")
		} else {
			b.WriteString("<tr><th>")
		}
		b.WriteString(html.EscapeString(c))
		for _, cell := range g.Cells[ci] {
			cellHTML(b, cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("</tbody></table>\n<p>Sources: ")
	for j, s := range g.Sources {
		fmt.Fprintf(b, "%d %s; ", j+1, html.EscapeString(s.String()))
	}
	b.WriteString("</p>\n")
	causes(b, g)
	b.WriteString("</section>\n")
}

// cellHTML writes one cell: its class says its phase (the legend maps
// classes to phases), and a cell not synced has a title (its row and
// message). Nothing else: at 10,000 cells every byte counts ten thousand
// times.
func cellHTML(b *strings.Builder, cell grid.Cell) {
	if cell.Row == nil {
		fmt.Fprintf(b, "<td class=%s>", Class(cellstate.None))
		return
	}
	fmt.Fprintf(b, "<td class=%s", Class(cell.State))
	if !cellstate.Ready(cell.State) {
		fmt.Fprintf(b, " title=\"%s: %s\"", html.EscapeString(cell.Row.Name), html.EscapeString(cell.Row.Status.Message))
	}
	b.WriteString(">")
}

func causes(b *strings.Builder, g *grid.Grid) {
	groups := g.NotReady()
	if len(groups) == 0 {
		b.WriteString("<p>Every copy is synced at its source's current version.</p>\n")
		return
	}
	b.WriteString("<h3>Not ready, by cause</h3>\n")
	for _, gr := range groups {
		names := gr.Clusters
		fmt.Fprintf(b, "<div class=cause><i class=%s>&nbsp;&nbsp;&nbsp;</i> <b>%s</b>, %d copies in %d Clusters: <code>%s</code>\n<details><summary>Clusters</summary>%s</details></div>\n",
			Class(gr.State), gr.State, len(gr.Rows), len(names), html.EscapeString(gr.Message), html.EscapeString(strings.Join(names, ", ")))
	}
}

// script filters a grid's Clusters (not ready only; by name) and shows a
// hovered cell's title at the bottom of the window.
const script = `<div id=tip></div>
<script>
(function(){
  document.querySelectorAll('section').forEach(function(s){
    var only=s.querySelector('.notready'), text=s.querySelector('.filter'), rows=s.querySelectorAll('tbody tr');
    function apply(){
      var q=text.value.toLowerCase();
      rows.forEach(function(r){
        var hide=(only.checked&&r.classList.contains('r'))||(q&&r.firstChild.textContent.toLowerCase().indexOf(q)<0);
        r.classList.toggle('hide',!!hide);
      });
    }
    only.addEventListener('change',apply);
    text.addEventListener('input',apply);
  });
  var tip=document.getElementById('tip'), phase={};
  document.querySelectorAll('.legend span').forEach(function(l){phase[l.firstChild.className]=l.dataset.phase;});
  document.addEventListener('mouseover',function(e){
    var t=e.target;
    if(t.tagName!=='TD'){return;}
    var tr=t.parentNode, table=tr.closest('table'), col=Array.prototype.indexOf.call(tr.children,t);
    var head=table.tHead.rows[0].cells[col];
    tip.textContent=tr.firstChild.textContent+' / '+(head.title||'')+': '+(phase[t.className]||t.className)+(t.title?' - '+t.title:'');
  });
})();
</script>
`
