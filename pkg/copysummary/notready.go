package copysummary

import (
	"cmp"
	"slices"
	"strings"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// notReadyGroup is the not-ready rows of one label (a phase, or OutOfDate
// for rows synced at an older version), as status.nonReady and
// status.message use them: how many there are and the first few in order.
type notReadyGroup struct {
	label    string
	severity int
	count    int
	// first are the group's first rows by Cluster, then row name: at most
	// keepPerGroup of them.
	first []Row
}

// keepPerGroup is how many rows of a group are kept: enough for
// status.nonReady (whose first MaxNonReady rows may all be of one group)
// and for the message's examples.
const keepPerGroup = max(MaxNonReady, examplesPerPhase)

// notReadyGroups returns the wanted rows not synced at their source's
// current version (synced[i] false), grouped by label, most severe group first, each
// group's kept rows by Cluster, then by row name: the order a full sort by
// (severity, Cluster, name) gives, without sorting every row. A summary of
// 10,000 rows is recomputed up to four times a second during a change of
// every source, and sorting all of them (structs of a dozen fields) was a
// quarter of Courier's CPU in that step (docs/benchmarks.md): this keeps
// the cost one pass and a bounded insertion per row.
func notReadyGroups(rows []Row, synced []bool) []notReadyGroup {
	var groups []notReadyGroup
	for i := range rows {
		r := &rows[i]
		if Leftover(r.Phase) || synced[i] {
			continue
		}
		label, sev := groupLabel(*r), severity(r.Phase, r.Phase == courier.CopyPhaseSynced)
		g := groupFor(&groups, label, sev)
		g.count++
		g.keep(r)
	}
	slices.SortFunc(groups, func(a, b notReadyGroup) int {
		return cmp.Or(cmp.Compare(a.severity, b.severity), strings.Compare(a.label, b.label))
	})
	return groups
}

// groupFor returns the group of label, adding it when new. There are at
// most a handful of groups, one per phase.
func groupFor(groups *[]notReadyGroup, label string, severity int) *notReadyGroup {
	for i := range *groups {
		if (*groups)[i].label == label {
			return &(*groups)[i]
		}
	}
	*groups = append(*groups, notReadyGroup{label: label, severity: severity})
	return &(*groups)[len(*groups)-1]
}

// keep inserts r among the group's first rows when it sorts before the
// last of a full set.
func (g *notReadyGroup) keep(r *Row) {
	if len(g.first) == keepPerGroup && byClusterAndName(*r, g.first[len(g.first)-1]) >= 0 {
		return
	}
	at, _ := slices.BinarySearchFunc(g.first, *r, byClusterAndName)
	if len(g.first) < keepPerGroup {
		g.first = append(g.first, Row{})
	}
	copy(g.first[at+1:], g.first[at:len(g.first)-1])
	g.first[at] = *r
}

func byClusterAndName(a, b Row) int {
	return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Name, b.Name))
}

// firstNotReady returns the first n not-ready rows over all groups, in
// order, and how many there are in all.
func firstNotReady(groups []notReadyGroup, n int) (first []Row, total int) {
	for _, g := range groups {
		total += g.count
		for _, r := range g.first {
			if len(first) == n {
				break
			}
			first = append(first, r)
		}
	}
	return first, total
}
