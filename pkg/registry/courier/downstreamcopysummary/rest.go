// Package downstreamcopysummary is the rest.Storage of the read-only,
// computed resource downstreamcopysummaries.courier.dev: one summary per
// owner (HelmOp or Bundle) of downstreamcopies rows, served from the store
// pkg/copysummary fills (docs/design.md#summaries).
//
// Every read first brings the stored summaries up to the rows as they are
// (Syncer): the summarizer recomputes summaries nobody watches only now and
// then. A summary read by name -- a GET, or a list or watch whose field
// selector pins metadata.name, as `kubectl wait` does -- reflects its
// sources' resourceVersions as of the request: see floor.go.
package downstreamcopysummary

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/registry/computed"
)

// REST serves downstreamcopysummaries: get, list and watch, with label and
// field selectors and server-side tables.
type REST struct {
	*computed.Resource[*courier.DownstreamCopySummary]
	sources SourceVersions
	syncer  Syncer
	now     func() metav1.Time
}

// Syncer brings the stored summaries up to the rows: Sync returns once
// they reflect every row change made before the call
// (copysummary.Summarizer.Sync), or an error when it gave up, and then the
// read is served what is stored.
type Syncer interface {
	Sync(ctx context.Context) error
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

// NewREST returns the storage of downstreamcopysummaries, reading store
// after syncer's Sync (nil: store as it is) and, for reads by name, the
// sources' current resourceVersions from sources.
func NewREST(store *memstore.Store[*courier.DownstreamCopySummary], sources SourceVersions, syncer Syncer) *REST {
	return &REST{
		Resource: computed.New(store, computed.Spec[*courier.DownstreamCopySummary]{
			GroupResource: courier.Resource("downstreamcopysummaries"),
			New:           func() *courier.DownstreamCopySummary { return &courier.DownstreamCopySummary{} },
			NewList:       newList,
			FieldLabels:   v1alpha1.DownstreamCopySummaryFieldLabels,
			Fields:        selectableFields,
			Columns:       columns,
			Cells:         cells,
			Kind:          "DownstreamCopySummary",
			SingularName:  "downstreamcopysummary",
			ShortNames:    []string{"dcs"},
			Categories:    []string{"courier"},
		}),
		sources: sources,
		syncer:  syncer,
		now:     func() metav1.Time { return metav1.Now().Rfc3339Copy() },
	}
}

// sync brings the store up to the rows before a read. A Sync that gave up
// (the summarizer is not following the rows, or the request ended) leaves
// the read to what is stored: never older than the last recompute.
func (r *REST) sync(ctx context.Context) {
	if r.syncer == nil {
		return
	}
	if err := r.syncer.Sync(ctx); err != nil {
		klog.FromContext(ctx).V(2).Info("Serving downstreamcopysummaries as stored: they could not be brought up to the rows", "error", err)
	}
}

func newList(items []*courier.DownstreamCopySummary, resourceVersion string) runtime.Object {
	list := &courier.DownstreamCopySummaryList{Items: make([]courier.DownstreamCopySummary, 0, len(items))}
	list.ResourceVersion = resourceVersion
	for _, it := range items {
		list.Items = append(list.Items, *it)
	}
	return list
}

// selectableFields returns the values of v1alpha1.DownstreamCopySummaryFieldLabels.
func selectableFields(o *courier.DownstreamCopySummary) fields.Set {
	return fields.Set{
		"spec.owner.kind": string(o.Spec.Owner.Kind),
		"spec.owner.name": o.Spec.Owner.Name,
		"spec.gitRepo":    o.Spec.GitRepo,
	}
}

// Get implements rest.Getter: the stored summary, floored by its sources'
// current resourceVersions.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	r.sync(ctx)
	obj, err := r.Resource.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	f := r.newFloor()
	f.apply(ctx, obj.(*courier.DownstreamCopySummary))
	return obj, nil
}

// List implements rest.Lister. A list whose field selector pins
// metadata.name has each summary floored; other lists show the summaries
// as the view has them.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	r.sync(ctx)
	obj, err := r.Resource.List(ctx, options)
	if err != nil || !byName(options) {
		return obj, err
	}
	list := obj.(*courier.DownstreamCopySummaryList)
	f := r.newFloor()
	for i := range list.Items {
		f.apply(ctx, &list.Items[i])
	}
	return list, nil
}

// Watch implements rest.Watcher. A watch whose field selector pins
// metadata.name has every event's summary floored by the sources'
// resourceVersions read when the watch started (or, for a source the
// summary did not name then, when an event first names it).
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	r.sync(ctx) // the initial events are the summaries as of the request
	f := r.newFloor()
	if byName(options) {
		// The sources of the summary as it is now are read before the
		// watch starts: every event sent, from history or not, is at
		// least as new as this request.
		name, _ := options.FieldSelector.RequiresExactMatch("metadata.name")
		if cur, err := r.Resource.Get(ctx, name, nil); err == nil {
			f.readAll(ctx, cur.(*courier.DownstreamCopySummary))
		}
	}
	w, err := r.Resource.Watch(ctx, options)
	if err != nil || !byName(options) {
		return w, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if s, ok := ev.Object.(*courier.DownstreamCopySummary); ok && ev.Type != watch.Bookmark && ev.Type != watch.Deleted {
			f.apply(ctx, s)
		}
		return ev, true
	}), nil
}

// byName says whether a list or watch pins metadata.name, as `kubectl
// wait` and `kubectl get <name> -w` do.
func byName(options *metainternalversion.ListOptions) bool {
	if options == nil || options.FieldSelector == nil {
		return false
	}
	_, ok := options.FieldSelector.RequiresExactMatch("metadata.name")
	return ok
}
