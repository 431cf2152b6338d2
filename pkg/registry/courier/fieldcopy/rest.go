// Package fieldcopy is the rest.Storage of the read-only, computed resource
// fieldcopies.courier.dev: one row per k8s-copier style rule on one target
// object, served from a memstore that the field-copy engine fills
// (docs/design.md#field-copies).
package fieldcopy

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/registry/computed"
)

// REST serves fieldcopies: get, list and watch, with label and field
// selectors and server-side tables.
type REST struct {
	*computed.Resource[*courier.FieldCopy]
}

var (
	_ rest.Storage              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.TableConvertor       = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.ShortNamesProvider   = &REST{}
	_ rest.CategoriesProvider   = &REST{}
	_ rest.KindProvider         = &REST{}
)

// NewREST returns the storage of fieldcopies, reading store.
func NewREST(store *memstore.Store[*courier.FieldCopy]) *REST {
	return &REST{Resource: computed.New(store, computed.Spec[*courier.FieldCopy]{
		GroupResource: courier.Resource("fieldcopies"),
		New:           func() *courier.FieldCopy { return &courier.FieldCopy{} },
		NewList:       newList,
		FieldLabels:   v1alpha1.FieldCopyFieldLabels,
		Fields:        selectableFields,
		Columns:       columns,
		Cells:         cells,
		Kind:          "FieldCopy",
		SingularName:  "fieldcopy",
		ShortNames:    nil,
		Categories:    []string{"courier"},
	})}
}

func newList(items []*courier.FieldCopy, resourceVersion string) runtime.Object {
	list := &courier.FieldCopyList{Items: make([]courier.FieldCopy, 0, len(items))}
	list.ResourceVersion = resourceVersion
	for _, it := range items {
		list.Items = append(list.Items, *it)
	}
	return list
}

// selectableFields returns the values of v1alpha1.FieldCopyFieldLabels.
func selectableFields(o *courier.FieldCopy) fields.Set {
	return fields.Set{
		"spec.target.kind":     o.Spec.Target.Kind,
		"spec.target.name":     o.Spec.Target.Name,
		"spec.destinationPath": o.Spec.DestinationPath,
		"spec.mode":            string(o.Spec.Mode),
		"status.phase":         string(o.Status.Phase),
	}
}
