package computed

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ConvertToTable implements rest.TableConvertor for one object of the
// resource (also the empty one a watch sends as a bookmark) or its list,
// with the Spec's Columns and Cells. Every row holds its object, as the
// API server's table handler requires.
func (r *Resource[T]) ConvertToTable(_ context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{}
	switch o := object.(type) {
	case T:
		t.ResourceVersion = o.GetResourceVersion()
	default:
		if reflect.TypeOf(object) != reflect.TypeOf(r.spec.NewList(nil, "")) {
			return nil, fmt.Errorf("cannot show %T as a table of %s", object, r.spec.GroupResource.Resource)
		}
		l, err := meta.ListAccessor(object)
		if err != nil {
			return nil, err
		}
		t.ResourceVersion = l.GetResourceVersion()
		t.Continue = l.GetContinue()
		t.RemainingItemCount = l.GetRemainingItemCount()
	}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || opts == nil || !opts.NoHeaders {
		t.ColumnDefinitions = append([]metav1.TableColumnDefinition(nil), r.spec.Columns...)
	}
	var err error
	t.Rows, err = table.MetaToTableRow(object, func(obj runtime.Object, _ metav1.Object, name, age string) ([]interface{}, error) {
		o, ok := obj.(T)
		if !ok {
			return nil, fmt.Errorf("cannot show %T as a row of %s", obj, r.spec.GroupResource.Resource)
		}
		return r.spec.Cells(o, name, age), nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}
