package downstreamcopy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// columns are the Table columns of downstreamcopies; Priority 1 columns
// appear only with kubectl's -o wide.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "HelmOp", Type: "string", Description: "The fleet.cattle.io HelmOp, in this object's namespace, that lists the source; bundle:<name> for a Bundle (the name of its downstreamcopysummary)."},
	{Name: "Cluster", Type: "string", Description: "The fleet.cattle.io Cluster the copy goes to."},
	{Name: "Kind", Type: "string", Description: "Kind of the source: Secret or ConfigMap as listed in the HelmOp."},
	{Name: "Source", Type: "string", Description: "Name of the source object, in the HelmOp's namespace."},
	{Name: "Namespace", Type: "string", Description: "Destination namespace of the copy in the downstream cluster."},
	{Name: "Phase", Type: "string", Description: "Where the copy stands: Pending, Synced, SourceMissing, Forbidden, Conflict, Unreachable, Invalid, Deleting or Kept."},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "Message", Type: "string", Priority: 1, Description: "Why the copy is in its phase, in words meant for people."},
	{Name: "Synced-RV", Type: "string", Priority: 1, Description: "The source resourceVersion the downstream copy was made from."},
	{Name: "Delivered-By", Type: "string", Priority: 1, Description: "Who writes the copy: the Courier replica holding the Cluster's bucket as the replica answering sees it (<none> while nobody does), agent for a pulled Cluster, leader without sharding. Read when the table is rendered, never stored."},
}

// DeliveredBy names who delivers to the Cluster namespace/name, for the
// Delivered-By column; nil leaves the column empty.
type DeliveredBy func(namespace, cluster string) string

// cellsWith returns the cells function of the table, asking by who
// delivers each row's Cluster.
func cellsWith(by DeliveredBy) func(o *courier.DownstreamCopy, name, age string) []interface{} {
	return func(o *courier.DownstreamCopy, name, age string) []interface{} {
		deliverer := ""
		if by != nil {
			deliverer = by(o.Namespace, o.Spec.Cluster)
		}
		return append(cells(o, name, age), deliverer)
	}
}

// cells returns one row's cells, in columns order, but for Delivered-By.
func cells(o *courier.DownstreamCopy, name, age string) []interface{} {
	return []interface{}{
		name,
		ownerCell(o.Spec),
		o.Spec.Cluster,
		o.Spec.Source.Kind,
		o.Spec.Source.Name,
		o.Spec.Target.Namespace,
		string(o.Status.Phase),
		age,
		o.Status.Message,
		o.Status.SyncedResourceVersion,
	}
}

// ownerCell is what the HelmOp column shows: the HelmOp, or bundle:<name>
// for a Bundle's row (the name of the Bundle's downstreamcopysummary).
func ownerCell(spec courier.DownstreamCopySpec) string {
	if spec.Owner.Kind == courier.OwnerKindBundle {
		return courier.BundleSummaryPrefix + spec.Owner.Name
	}
	return spec.HelmOp
}
