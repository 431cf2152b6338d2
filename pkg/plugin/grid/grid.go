// Package grid arranges an owner's rows as a Clusters × sources matrix of
// cell states and groups the rows that are not ready by shared cause. The
// text status and the HTML report both draw from it.
package grid

import (
	"regexp"
	"sort"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// Source is one column: a listed source.
type Source struct {
	Kind, Name string
}

// String is Kind/name.
func (s Source) String() string { return s.Kind + "/" + s.Name }

// Cell is one Cluster's copy of one source.
type Cell struct {
	State cellstate.State
	// Row is the row shown, nil for None.
	Row *v1alpha1.DownstreamCopy
}

// Grid is one owner's rows as a matrix.
type Grid struct {
	Namespace string
	Owner     load.Owner
	// Clusters are the rows of the matrix, sorted by name.
	Clusters []string
	// Sources are its columns, sorted by kind then name.
	Sources []Source
	// Cells is indexed [cluster][source].
	Cells [][]Cell
	// Counts counts the rows by state.
	Counts map[cellstate.State]int
	// Rows is how many rows the grid holds.
	Rows int
}

// Build arranges rows into one grid per owner, sorted by namespace and
// owner. When two rows fall into one cell (a leftover next to a wanted
// copy), the more severe is shown; both are counted.
func Build(rows []v1alpha1.DownstreamCopy) []*Grid {
	type key struct {
		ns    string
		owner load.Owner
	}
	byOwner := map[key][]*v1alpha1.DownstreamCopy{}
	for i := range rows {
		r := &rows[i]
		k := key{r.Namespace, load.OwnerOf(r)}
		byOwner[k] = append(byOwner[k], r)
	}
	grids := make([]*Grid, 0, len(byOwner))
	for k, rs := range byOwner {
		grids = append(grids, build(k.ns, k.owner, rs))
	}
	sort.Slice(grids, func(i, j int) bool {
		a, b := grids[i], grids[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Owner.SummaryName() < b.Owner.SummaryName()
	})
	return grids
}

func build(ns string, owner load.Owner, rows []*v1alpha1.DownstreamCopy) *Grid {
	g := &Grid{Namespace: ns, Owner: owner, Counts: map[cellstate.State]int{}, Rows: len(rows)}
	clusters, sources := map[string]int{}, map[Source]int{}
	for _, r := range rows {
		clusters[r.Spec.Cluster] = 0
		sources[Source{r.Spec.Source.Kind, r.Spec.Source.Name}] = 0
	}
	for c := range clusters {
		g.Clusters = append(g.Clusters, c)
	}
	sort.Strings(g.Clusters)
	for i, c := range g.Clusters {
		clusters[c] = i
	}
	for s := range sources {
		g.Sources = append(g.Sources, s)
	}
	sort.Slice(g.Sources, func(i, j int) bool {
		a, b := g.Sources[i], g.Sources[j]
		return a.Kind < b.Kind || a.Kind == b.Kind && a.Name < b.Name
	})
	for i, s := range g.Sources {
		sources[s] = i
	}
	g.Cells = make([][]Cell, len(g.Clusters))
	for i := range g.Cells {
		g.Cells[i] = make([]Cell, len(g.Sources))
		for j := range g.Cells[i] {
			g.Cells[i][j].State = cellstate.None
		}
	}
	for _, r := range rows {
		st := cellstate.Of(r)
		g.Counts[st]++
		c := &g.Cells[clusters[r.Spec.Cluster]][sources[Source{r.Spec.Source.Kind, r.Spec.Source.Name}]]
		if c.Row == nil || cellstate.Rank(st) < cellstate.Rank(c.State) {
			c.State, c.Row = st, r
		}
	}
	return g
}

// ClusterReady reports whether every wanted copy of Cluster i is synced
// at its source's current version.
func (g *Grid) ClusterReady(i int) bool {
	wanted := false
	for _, c := range g.Cells[i] {
		switch {
		case c.State == cellstate.None || cellstate.Leftover(c.State):
		case !cellstate.Ready(c.State):
			return false
		default:
			wanted = true
		}
	}
	return wanted
}

// Group is rows not ready for one shared cause: the same state and the
// same message once the Cluster's name is taken out of it.
type Group struct {
	State cellstate.State
	// Message is the shared message, the Cluster written <cluster>; the
	// row's own message when the group has one row.
	Message string
	Rows    []*v1alpha1.DownstreamCopy
	// Clusters are the distinct Clusters of the rows, in order.
	Clusters []string
}

// NotReady groups the rows that are not Synced at their source's current
// version (leftovers aside), most severe first, then the largest group,
// then by message.
func (g *Grid) NotReady() []Group {
	index := map[[2]string]int{}
	var groups []Group
	var gen generalizer
	for i := range g.Cells {
		for _, c := range g.Cells[i] {
			if c.Row == nil || cellstate.Ready(c.State) || cellstate.Leftover(c.State) {
				continue
			}
			msg := gen.generalize(c.Row.Status.Message, c.Row.Spec.Cluster)
			k := [2]string{string(c.State), msg}
			n, ok := index[k]
			if !ok {
				n = len(groups)
				index[k] = n
				groups = append(groups, Group{State: c.State, Message: msg})
			}
			gr := &groups[n]
			gr.Rows = append(gr.Rows, c.Row)
			if len(gr.Clusters) == 0 || gr.Clusters[len(gr.Clusters)-1] != c.Row.Spec.Cluster {
				gr.Clusters = append(gr.Clusters, c.Row.Spec.Cluster)
			}
		}
	}
	for i := range groups {
		if len(groups[i].Rows) == 1 {
			groups[i].Message = groups[i].Rows[0].Status.Message
		}
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if ra, rb := cellstate.Rank(a.State), cellstate.Rank(b.State); ra != rb {
			return ra < rb
		}
		if len(a.Rows) != len(b.Rows) {
			return len(a.Rows) > len(b.Rows)
		}
		return a.Message < b.Message
	})
	return groups
}

// Generalize writes a message's mentions of cluster ("cluster c1",
// "Cluster ns/c1") as <cluster>, so that one cause in many Clusters reads
// as one message.
func Generalize(message, cluster string) string {
	var g generalizer
	return g.generalize(message, cluster)
}

// generalizer keeps the expression of the last Cluster: a grid's cells
// come Cluster by Cluster.
type generalizer struct {
	cluster string
	re      *regexp.Regexp
}

func (g *generalizer) generalize(message, cluster string) string {
	if cluster == "" {
		return message
	}
	if g.re == nil || g.cluster != cluster {
		g.cluster = cluster
		g.re = regexp.MustCompile(`([Cc]luster (?:[a-z0-9.-]+/)?)` + regexp.QuoteMeta(cluster) + `\b`)
	}
	return g.re.ReplaceAllString(message, "${1}<cluster>")
}
