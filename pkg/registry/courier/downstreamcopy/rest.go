// Package downstreamcopy is the rest.Storage of the read-only, computed
// resource downstreamcopies.courier.dev: one row per HelmOp, targeted
// cluster and listed resource, served from a memstore that the copy engine
// fills (docs/design.md#the-downstreamcopy-view).
package downstreamcopy

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/registry/computed"
)

// REST serves downstreamcopies: get, list and watch, with label and field
// selectors and server-side tables.
type REST struct {
	*computed.Resource[*courier.DownstreamCopy]
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
	// The row store compares every recomputed row with the one it holds:
	// rows compare themselves without reflection.
	_ memstore.ContentEqualer[*courier.DownstreamCopy] = (*courier.DownstreamCopy)(nil)
)

// NewREST returns the storage of downstreamcopies, reading store; by
// fills the Delivered-By column (nil: empty).
func NewREST(store *memstore.Store[*courier.DownstreamCopy], by DeliveredBy) *REST {
	return &REST{Resource: computed.New(store, computed.Spec[*courier.DownstreamCopy]{
		GroupResource: courier.Resource("downstreamcopies"),
		New:           func() *courier.DownstreamCopy { return &courier.DownstreamCopy{} },
		NewList:       newList,
		FieldLabels:   v1alpha1.DownstreamCopyFieldLabels,
		Fields:        selectableFields,
		Columns:       columns,
		Cells:         cellsWith(by),
		Kind:          "DownstreamCopy",
		SingularName:  "downstreamcopy",
		ShortNames:    []string{"dcp"},
		Categories:    []string{"courier"},
	})}
}

func newList(items []*courier.DownstreamCopy, resourceVersion string) runtime.Object {
	list := &courier.DownstreamCopyList{Items: make([]courier.DownstreamCopy, 0, len(items))}
	list.ResourceVersion = resourceVersion
	for _, it := range items {
		list.Items = append(list.Items, *it)
	}
	return list
}

// selectableFields returns the values of v1alpha1.DownstreamCopyFieldLabels.
func selectableFields(o *courier.DownstreamCopy) fields.Set {
	return fields.Set{
		"spec.helmOp":      o.Spec.HelmOp,
		"spec.owner.kind":  string(o.Spec.Owner.Kind),
		"spec.owner.name":  o.Spec.Owner.Name,
		"spec.gitRepo":     o.Spec.GitRepo,
		"spec.cluster":     o.Spec.Cluster,
		"spec.source.kind": o.Spec.Source.Kind,
		"spec.source.name": o.Spec.Source.Name,
		"status.phase":     string(o.Status.Phase),
	}
}

// WatchIndexField is the field the rows' watchers are indexed by.
const WatchIndexField = "spec.cluster"

// WatchIndex indexes the watchers of the store downstreamcopies are
// served from by spec.cluster (docs/design.md#pull-delivery): each courier-agent
// holds one watch with fieldSelector spec.cluster=<its Cluster>, and a row
// change costs work for the watchers of that row's Cluster only. Pass it
// to memstore.New.
func WatchIndex() memstore.Option {
	return memstore.WithWatchIndex(WatchIndexField, func(o *courier.DownstreamCopy) string { return o.Spec.Cluster })
}

// EventCopy is the rows store's event copy (memstore.WithEventCopy): a
// shallow copy. The rows' watchers are the generic server's, which reads
// a row to encode it and sets only its kind; the in-process summarizer
// takes the stored rows themselves (WatchShared).
func EventCopy() memstore.Option {
	return memstore.WithEventCopy(func(o *courier.DownstreamCopy) *courier.DownstreamCopy {
		c := *o
		return &c
	})
}
