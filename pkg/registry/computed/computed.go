// Package computed is the part of rest.Storage that every read-only,
// computed Courier resource shares: Get, List and Watch over a
// memstore.Store, with the request's namespace, label selectors on the
// object's labels and field selectors on metadata.name, metadata.namespace
// and the resource's own selectable fields. A registry embeds *Resource and
// adds what differs: its types, names, fields and table.
package computed

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/courier-dev/courier/pkg/memstore"
)

// Spec describes one computed resource.
type Spec[T memstore.Object] struct {
	// GroupResource names the resource in errors.
	GroupResource schema.GroupResource
	// New returns an empty object, used as the bookmark of a watch.
	New func() T
	// NewList wraps items (deep copies, sorted) in the resource's list type
	// with the given resource version.
	NewList func(items []T, resourceVersion string) runtime.Object
	// FieldLabels are the fields a field selector may name besides
	// metadata.name and metadata.namespace.
	FieldLabels []string
	// Fields returns the values of FieldLabels for one object.
	Fields func(T) fields.Set
	// Columns are the server-side Table's columns (Priority 1: -o wide only).
	Columns []metav1.TableColumnDefinition
	// Cells returns one row's cells, in Columns order, given the name and
	// age MetaToTableRow computed.
	Cells func(obj T, name, age string) []interface{}
	// Kind, SingularName, ShortNames and Categories are what discovery
	// says about the resource.
	Kind         string
	SingularName string
	ShortNames   []string
	Categories   []string
}

// Resource implements rest.Getter, the List half of rest.Lister and
// rest.Watcher for a Spec over a store.
type Resource[T memstore.Object] struct {
	store *memstore.Store[T]
	spec  Spec[T]
}

// New returns the Get/List/Watch part of the storage for spec, reading store.
func New[T memstore.Object](store *memstore.Store[T], spec Spec[T]) *Resource[T] {
	return &Resource[T]{store: store, spec: spec}
}

// Get implements rest.Getter. It returns NotFound for an object the store
// does not hold in the request's namespace.
func (r *Resource[T]) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, ok := r.store.Get(genericapirequest.NamespaceValue(ctx), name)
	if !ok {
		return nil, apierrors.NewNotFound(r.spec.GroupResource, name)
	}
	return obj, nil
}

// List implements rest.Lister. It returns the matching objects in the
// request's namespace (all namespaces when there is none), in pages when
// the request sets a limit, choosing the state as the kube-apiserver's watch
// cache does:
//   - continue: the next page of the list the token came from, in that
//     list's state (410 Gone once the store no longer has it, 400 for a
//     token that cannot be read or a resourceVersion other than "" or "0"
//     given with it);
//   - resourceVersionMatch=Exact, or a limit with resourceVersion N (not
//     "0") and no resourceVersionMatch: the state at that version, while
//     the store's history reaches back to it, 410 Gone otherwise;
//   - resourceVersion "0": the current state, whole, whatever the limit
//     (the watch cache serves any state it has and ignores the limit);
//   - otherwise the current state.
//
// Every page of one list has the resourceVersion of its state; every page
// but the last has a continue token and, without selectors, the number of
// items that follow.
func (r *Resource[T]) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	match, err := r.Predicate(options)
	if err != nil {
		return nil, err
	}
	var o metainternalversion.ListOptions
	if options != nil {
		o = *options
	}
	page := memstore.PageOptions{Limit: o.Limit, Continue: o.Continue}
	switch {
	case o.Continue != "":
		if o.ResourceVersion != "" && o.ResourceVersion != "0" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		if o.ResourceVersionMatch != "" {
			return nil, apierrors.NewBadRequest("resourceVersionMatch is forbidden when continue is provided")
		}
	case o.ResourceVersionMatch == metav1.ResourceVersionMatchExact:
		page.ResourceVersion = o.ResourceVersion
	case o.ResourceVersion == "0":
		page.Limit = 0
	case o.ResourceVersionMatch == "" && o.Limit > 0 && o.ResourceVersion != "":
		page.ResourceVersion = o.ResourceVersion
	}
	p, err := r.store.ListPage(genericapirequest.NamespaceValue(ctx), match, page)
	if err != nil {
		return nil, err
	}
	list := r.spec.NewList(p.Items, p.ResourceVersion)
	if p.Continue != "" {
		meta, err := apimeta.ListAccessor(list)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		meta.SetContinue(p.Continue)
		meta.SetRemainingItemCount(p.RemainingItemCount)
	}
	return list, nil
}

// Watch implements rest.Watcher; see memstore.Store.Watch for where a watch
// starts and which events it sends.
func (r *Resource[T]) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	match, err := r.Predicate(options)
	if err != nil {
		return nil, err
	}
	ns := genericapirequest.NamespaceValue(ctx)
	// A watch whose field selector pins the store's index field (every
	// courier-agent's, spec.cluster=<its Cluster>) is filed under that
	// value: a change of another value's objects costs it nothing.
	if f := r.store.WatchIndexField(); f != "" && options != nil && options.FieldSelector != nil {
		if v, ok := options.FieldSelector.RequiresExactMatch(f); ok {
			if onlyPins(options, f) {
				match = nil // the index selects exactly what the selector does
			}
			return r.store.WatchIndexed(ctx, ns, v, match, options, r.spec.New)
		}
	}
	return r.store.Watch(ctx, ns, match, options, r.spec.New)
}

// onlyPins reports whether options select by nothing but field = value
// (no label selector, one field requirement).
func onlyPins(options *metainternalversion.ListOptions, field string) bool {
	if options.LabelSelector != nil && !options.LabelSelector.Empty() {
		return false
	}
	reqs := options.FieldSelector.Requirements()
	return len(reqs) == 1 && reqs[0].Field == field
}

// Predicate returns the function that decides whether an object is selected
// by the label and field selectors of options (nil when everything is). A
// field selector naming a field the resource does not offer is a bad
// request.
func (r *Resource[T]) Predicate(options *metainternalversion.ListOptions) (func(T) bool, error) {
	var label labels.Selector
	var field fields.Selector
	if options != nil {
		label, field = options.LabelSelector, options.FieldSelector
	}
	if label != nil && label.Empty() {
		label = nil
	}
	if field != nil && field.Empty() {
		field = nil
	}
	if field != nil {
		for _, req := range field.Requirements() {
			switch f := req.Field; {
			case f == "metadata.name", f == "metadata.namespace", slices.Contains(r.spec.FieldLabels, f):
			default:
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label %q is not supported for %s", f, r.spec.GroupResource))
			}
		}
	}
	if label == nil && field == nil {
		return nil, nil
	}
	return func(obj T) bool {
		if label != nil && !label.Matches(labels.Set(obj.GetLabels())) {
			return false
		}
		return field == nil || field.Matches(r.FieldSet(obj))
	}, nil
}

// FieldSet returns every selectable field of obj: metadata.name,
// metadata.namespace and the resource's own.
func (r *Resource[T]) FieldSet(obj T) fields.Set {
	set := fields.Set{
		"metadata.name":      obj.GetName(),
		"metadata.namespace": obj.GetNamespace(),
	}
	if r.spec.Fields != nil {
		for k, v := range r.spec.Fields(obj) {
			set[k] = v
		}
	}
	return set
}

// New implements rest.Storage.
func (r *Resource[T]) New() runtime.Object { return r.spec.New() }

// NewList implements rest.Lister.
func (r *Resource[T]) NewList() runtime.Object { return r.spec.NewList(nil, "") }

// Destroy implements rest.Storage. The store belongs to the caller.
func (r *Resource[T]) Destroy() {}

// NamespaceScoped implements rest.Scoper: both views are namespaced.
func (r *Resource[T]) NamespaceScoped() bool { return true }

// GetSingularName implements rest.SingularNameProvider.
func (r *Resource[T]) GetSingularName() string { return r.spec.SingularName }

// ShortNames implements rest.ShortNamesProvider.
func (r *Resource[T]) ShortNames() []string { return r.spec.ShortNames }

// Categories implements rest.CategoriesProvider.
func (r *Resource[T]) Categories() []string { return r.spec.Categories }

// Kind implements rest.KindProvider.
func (r *Resource[T]) Kind() string { return r.spec.Kind }
