package copyview

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// Engine is the copy engine as the view sees it: it is told each HelmOp's
// rows, and reports what happened to each. Defined here, where it is used,
// so the view does not depend on the engine's implementation.
//
// Data flows one way: the engine takes what to copy from the rows' specs
// (copycontract.Copyable), never from their status, and the view learns what the
// engine did only through Status, Leftovers and the
// copycontract.StatusChange notifications the engine sends.
type Engine interface {
	// SetDesired replaces what one HelmOp wants copied with its rows (nil
	// or empty when it has none, or is gone): the rows as the view computed
	// them, before anything from Status is overlaid. It must not keep the
	// rows.
	SetDesired(helmOp types.NamespacedName, rows []*courier.DownstreamCopy)
	// UpdateDesired replaces some of one HelmOp's rows, handed over before
	// by SetDesired, with new versions that differ only in their source's
	// resourceVersion. It returns false, changing nothing, when it cannot
	// (a row it does not hold that way, or DesiredComplete not called yet):
	// the view then hands over the whole HelmOp with SetDesired. It must
	// not keep the rows.
	UpdateDesired(helmOp types.NamespacedName, rows []*courier.DownstreamCopy) bool
	// DesiredComplete says that every HelmOp has been handed over once
	// since the start: until then the engine must not remove copies
	// (a HelmOp not handed over yet would look as if it wanted nothing).
	DesiredComplete()
	// Status returns the engine's record for a row ("<namespace>/<name>").
	Status(rowKey string) (copycontract.Status, bool)
	// Delivers reports whether this replica delivers to a pushed Cluster
	// ("<namespace>/<name>") now: only then is the engine's record the
	// deliverer's word; any other Cluster's rows show what its deliverer
	// published (Reports).
	Delivers(clusterKey string) bool
	// Leftovers returns the copies Courier made for one HelmOp (which may
	// be gone) that no row wants any more and that are still downstream:
	// kept (keepResources) or not removed yet.
	Leftovers(helmOp types.NamespacedName) []copycontract.Leftover
	// LeftoversKnown reports whether the engine has swept a Cluster
	// ("<namespace>/<name>") since it last gained it: only then are its
	// Leftovers the Cluster's.
	LeftoversKnown(clusterKey string) bool
}

// leftoverRow is the row of a leftover copy: named like the row that
// wanted it, so a copy that stops being wanted keeps its row (and its
// Deleting or Kept phase says why) until it is gone.
func leftoverRow(l copycontract.Leftover) *courier.DownstreamCopy {
	name := RowName(l.HelmOp.Name, l.Cluster, l.Kind, l.Name)
	o := copycontract.OwnerOf(l.HelmOp)
	row := &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: l.HelmOp.Namespace,
			Name:      name,
			UID:       rowUID(l.HelmOp.Namespace, name),
			Labels:    rowLabels(o, l.Cluster, l.Kind, false),
		},
		Spec: courier.DownstreamCopySpec{
			Owner:         o,
			HelmOp:        helmOpName(o),
			Cluster:       l.Cluster,
			Source:        courier.CopySource{Kind: l.Kind, Name: l.Name},
			Target:        courier.CopyTarget{Namespace: l.TargetNamespace, Name: l.Name},
			KeepResources: l.Keep,
		},
	}
	base := rowstatus.New(l.Phase, l.Message)
	base.SyncedResourceVersion = l.SyncedResourceVersion
	row.Status = rowstatus.Compose(base, l.Cluster, rowstatus.Delivery{})
	return row
}

// leftoverRows returns the rows of leftover copies. A wanted row (a true
// value in wanted, by row key) wins over a leftover of the same name (a
// copy left in a previous destination namespace, say), and of two
// leftovers of one name the first is kept.
func leftoverRows(wanted map[string]bool, leftovers []copycontract.Leftover) []*courier.DownstreamCopy {
	var rows []*courier.DownstreamCopy
	seen := map[string]bool{}
	for _, l := range leftovers {
		r := leftoverRow(l)
		if key := rowKey(r); !wanted[key] && !seen[key] {
			seen[key] = true
			rows = append(rows, r)
		}
	}
	return rows
}
