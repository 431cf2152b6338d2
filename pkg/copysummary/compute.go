// Package copysummary sums up the downstreamcopies rows of each owner (a
// HelmOp or a Bundle) into one DownstreamCopySummary (docs/design.md#summaries): how many
// Clusters and copies are synced at their sources' current
// resourceVersions, how many fail and why, and a Ready condition.
//
// Data flows one way: rows → Summarizer → summaries. Compute is a pure
// function of one owner's rows; the Summarizer follows the row store with a
// watch of its own, keeps the rows indexed by owner, and recomputes an owner
// whose rows changed at most once per coalescing window, writing its own
// store. It never reads the summaries back.
package copysummary

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// MaxNonReady is the most rows status.nonReady lists.
const MaxNonReady = 10

// The reasons of the Ready condition Compute sets.
const (
	ReasonSynced      = "Synced"      // every wanted copy is synced at its source's current version
	ReasonNoCopies    = "NoCopies"    // nothing is wanted: only leftovers (Kept, Deleting)
	ReasonFailing     = "Failing"     // some copies are in a phase someone must act on
	ReasonProgressing = "Progressing" // some copies are not synced yet, none failing
)

// Row is what a summary needs of one DownstreamCopy: no data, nor anything
// derived from it.
type Row struct {
	Name         string
	Namespace    string
	Owner        courier.CopyOwner
	GitRepo      string
	Cluster      string
	Source       courier.CopySource
	Phase        courier.CopyPhase
	SyncedRV     string
	Message      string
	CreationTime metav1.Time
}

// RowOf projects a DownstreamCopy onto a Row. A row without an owner kind
// (written before owners existed) belongs to its HelmOp.
func RowOf(dc *courier.DownstreamCopy) Row {
	owner := dc.Spec.Owner
	if owner.Kind == "" {
		owner = courier.CopyOwner{Kind: courier.OwnerKindHelmOp, Name: dc.Spec.HelmOp}
	}
	return Row{
		Name:         dc.Name,
		Namespace:    dc.Namespace,
		Owner:        owner,
		GitRepo:      dc.Spec.GitRepo,
		Cluster:      dc.Spec.Cluster,
		Source:       dc.Spec.Source,
		Phase:        dc.Status.Phase,
		SyncedRV:     dc.Status.SyncedResourceVersion,
		Message:      dc.Status.Message,
		CreationTime: dc.CreationTimestamp,
	}
}

// Name is the name of an owner's summary: the HelmOp's name, or
// bundle:<name> for a Bundle.
func Name(owner courier.CopyOwner) string {
	if owner.Kind == courier.OwnerKindBundle {
		return courier.BundleSummaryPrefix + owner.Name
	}
	return owner.Name
}

// KeyOf is the store key of the summary a row belongs to.
func KeyOf(r Row) memstore.Key {
	return memstore.Key{Namespace: r.Namespace, Name: Name(r.Owner)}
}

// Leftover says whether a row is a copy nothing wants any more: it counts in
// the phases, not in the Clusters, copies or readiness.
func Leftover(p courier.CopyPhase) bool {
	return p == courier.CopyPhaseKept || p == courier.CopyPhaseDeleting
}

// Failing says whether a phase needs someone to act.
func Failing(p courier.CopyPhase) bool {
	switch p {
	case courier.CopyPhaseForbidden, courier.CopyPhaseConflict, courier.CopyPhaseDenied,
		courier.CopyPhaseInvalid, courier.CopyPhaseUnreachable, courier.CopyPhaseSourceMissing:
		return true
	}
	return false
}

// severity orders not-ready rows, most severe first: the failing phases,
// then Pending, then rows Synced at an older version of their source
// (OutOfDate), then anything else.
func severity(p courier.CopyPhase, synced bool) int {
	order := []courier.CopyPhase{
		courier.CopyPhaseForbidden, courier.CopyPhaseConflict, courier.CopyPhaseDenied,
		courier.CopyPhaseInvalid, courier.CopyPhaseUnreachable, courier.CopyPhaseSourceMissing,
		courier.CopyPhasePending,
	}
	if i := slices.Index(order, p); i >= 0 {
		return i
	}
	if synced {
		return len(order)
	}
	return len(order) + 1
}

// CompareRV orders two resourceVersions: as unsigned integers when both
// parse, else equal strings are equal and any other pair is "different",
// reported as a < b (-1), so that a differing version never counts as
// older than one it cannot be compared with.
func CompareRV(a, b string) int {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	if a == b {
		return 0
	}
	return -1
}

// sourceKey is a source of one owner.
type sourceKey struct{ kind, name string }

// Compute sums up the rows of one owner (all in one namespace, all with the
// same owner; rows is not modified) into its summary. It returns nil for no
// rows. A source's current version is the newest its rows name; a copy is
// synced when its row is Synced at that version.
func Compute(rows []Row) *courier.DownstreamCopySummary {
	if len(rows) == 0 {
		return nil
	}
	s := &courier.DownstreamCopySummary{}
	s.Namespace, s.Name = rows[0].Namespace, Name(rows[0].Owner)
	s.Spec.Owner = rows[0].Owner
	s.CreationTimestamp = rows[0].CreationTime
	current := currentVersions(rows)
	// Whether each row is synced at its source's current version, beside
	// the rows rather than in a copy of them: cloning 10,000 rows was a
	// quarter of a summary's cost.
	synced := make([]bool, len(rows))
	for i := range rows {
		r := &rows[i]
		synced[i] = r.Phase == courier.CopyPhaseSynced && r.SyncedRV != "" && r.SyncedRV == current[sourceKey{r.Source.Kind, r.Source.Name}]
		if s.Spec.GitRepo == "" {
			s.Spec.GitRepo = r.GitRepo
		}
		if r.CreationTime.Before(&s.CreationTimestamp) {
			s.CreationTimestamp = r.CreationTime
		}
	}
	count(&s.Status, rows, synced, current)
	groups := notReadyGroups(rows, synced)
	first, total := firstNotReady(groups, MaxNonReady)
	s.Status.Incomplete = total > MaxNonReady
	for _, r := range first {
		s.Status.NonReady = append(s.Status.NonReady, courier.NonReadyCopy{
			Name: r.Name, Cluster: r.Cluster, Phase: r.Phase, Message: r.Message,
			Source: courier.CopySource{Kind: r.Source.Kind, Name: r.Source.Name},
		})
	}
	s.Status.Message = message(rows[0].Namespace, groups)
	s.Status.Conditions = []metav1.Condition{ready(&s.Status, rows)}
	return s
}

// currentVersions is the newest resourceVersion the rows name for each
// source ("" when none names one: the source is missing).
func currentVersions(rows []Row) map[sourceKey]string {
	cur := map[sourceKey]string{}
	for _, r := range rows {
		k := sourceKey{r.Source.Kind, r.Source.Name}
		if v, ok := cur[k]; !ok || v == "" || (r.Source.ResourceVersion != "" && CompareRV(v, r.Source.ResourceVersion) < 0) {
			cur[k] = r.Source.ResourceVersion
		}
	}
	return cur
}

// count fills the counts, the phases and the sources of st.
func count(st *courier.DownstreamCopySummaryStatus, rows []Row, synced []bool, current map[sourceKey]string) {
	st.Phases = map[string]int32{}
	clusters := map[string]bool{} // Cluster → every wanted copy synced
	sources := map[sourceKey]*courier.SummarySource{}
	for i, r := range rows {
		st.Phases[string(r.Phase)]++
		if Leftover(r.Phase) {
			continue
		}
		st.Copies++
		k := sourceKey{r.Source.Kind, r.Source.Name}
		src := sources[k]
		if src == nil {
			src = &courier.SummarySource{Kind: k.kind, Name: k.name, ResourceVersion: current[k]}
			sources[k] = src
		}
		src.Copies++
		if synced[i] {
			st.SyncedCopies++
			src.SyncedCopies++
		}
		if Failing(r.Phase) {
			st.Failing++
		}
		ok, seen := clusters[r.Cluster]
		clusters[r.Cluster] = synced[i] && (ok || !seen)
	}
	st.Clusters = int32(len(clusters))
	for _, ok := range clusters {
		if ok {
			st.ReadyClusters++
		}
	}
	for _, src := range sources {
		st.Sources = append(st.Sources, *src)
	}
	slices.SortFunc(st.Sources, func(a, b courier.SummarySource) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
}

// ready is the Ready condition: True only when every wanted copy is synced
// at its source's current version. Its LastTransitionTime is left to the
// caller, which knows the previous condition.
func ready(st *courier.DownstreamCopySummaryStatus, rows []Row) metav1.Condition {
	c := metav1.Condition{Type: courier.ConditionReady}
	switch {
	case st.Copies == 0:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonNoCopies
		c.Message = "no copies are wanted; " + strconv.Itoa(len(rows)) + " leftover rows (Kept or Deleting)"
	case st.SyncedCopies == st.Copies:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonSynced
		c.Message = "all " + strconv.Itoa(int(st.Copies)) + " copies in " + strconv.Itoa(int(st.Clusters)) + " Clusters are synced at their sources' current resourceVersions"
	case st.Failing > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonFailing
		c.Message = progress(st) + ", " + strconv.Itoa(int(st.Failing)) + " failing"
	default:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonProgressing
		c.Message = progress(st)
	}
	return c
}

func progress(st *courier.DownstreamCopySummaryStatus) string {
	return strconv.Itoa(int(st.SyncedCopies)) + " of " + strconv.Itoa(int(st.Copies)) + " copies synced, " +
		strconv.Itoa(int(st.ReadyClusters)) + " of " + strconv.Itoa(int(st.Clusters)) + " Clusters ready"
}
