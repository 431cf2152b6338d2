package downstreamcopy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// columns are the Table columns of downstreamcopies; Priority 1 columns
// appear only with kubectl's -o wide.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "HelmOp", Type: "string", Description: "The fleet.cattle.io HelmOp, in this object's namespace, that lists the source."},
	{Name: "Cluster", Type: "string", Description: "The fleet.cattle.io Cluster the copy goes to."},
	{Name: "Kind", Type: "string", Description: "Kind of the source: Secret or ConfigMap as listed in the HelmOp."},
	{Name: "Source", Type: "string", Description: "Name of the source object, in the HelmOp's namespace."},
	{Name: "Namespace", Type: "string", Description: "Destination namespace of the copy in the downstream cluster."},
	{Name: "Phase", Type: "string", Description: "Where the copy stands: Pending, Synced, SourceMissing, Forbidden, Conflict, Unreachable, Invalid, Deleting or Kept."},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "Message", Type: "string", Priority: 1, Description: "Why the copy is in its phase, in words meant for people."},
	{Name: "Synced-RV", Type: "string", Priority: 1, Description: "The source resourceVersion the downstream copy was made from."},
}

// ConvertToTable implements rest.TableConvertor for a DownstreamCopy (also
// the empty one a watch sends as a bookmark) or a DownstreamCopyList.
func (*REST) ConvertToTable(_ context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{}
	switch o := object.(type) {
	case *courier.DownstreamCopy:
		t.ResourceVersion = o.ResourceVersion
	case *courier.DownstreamCopyList:
		t.ResourceVersion = o.ResourceVersion
		t.Continue = o.Continue
	default:
		return nil, fmt.Errorf("cannot show %T as a table of downstreamcopies", object)
	}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || opts == nil || !opts.NoHeaders {
		t.ColumnDefinitions = append([]metav1.TableColumnDefinition(nil), columns...)
	}
	var err error
	t.Rows, err = table.MetaToTableRow(object, func(obj runtime.Object, _ metav1.Object, name, age string) ([]interface{}, error) {
		o := obj.(*courier.DownstreamCopy)
		return []interface{}{
			name,
			o.Spec.HelmOp,
			o.Spec.Cluster,
			o.Spec.Source.Kind,
			o.Spec.Source.Name,
			o.Spec.Target.Namespace,
			string(o.Status.Phase),
			age,
			o.Status.Message,
			o.Status.SyncedResourceVersion,
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}
