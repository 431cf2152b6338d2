// Package load reads what kubectl courier shows from the API: summaries,
// rows, a row's table cells and Events, one call per resource, and turns
// the API's errors into messages that say what to do (the API not
// installed, a right missing, an owner that does not exist).
package load

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// Source is what the commands read. Namespace "" means every namespace.
type Source interface {
	ListSummaries(ctx context.Context, namespace string) ([]v1alpha1.DownstreamCopySummary, error)
	// GetSummary reads a summary by name: the read the view floors with
	// its sources' live resourceVersions (docs/summaries.md), so it never
	// shows a state older than a source write that returned before it.
	GetSummary(ctx context.Context, namespace, name string) (*v1alpha1.DownstreamCopySummary, error)
	// WatchSummary watches one summary by name from resourceVersion rv;
	// every event is floored like GetSummary.
	WatchSummary(ctx context.Context, namespace, name, rv string) (watch.Interface, error)
	ListRows(ctx context.Context, namespace string, selector fields.Selector) ([]v1alpha1.DownstreamCopy, error)
	GetRow(ctx context.Context, namespace, name string) (*v1alpha1.DownstreamCopy, error)
	// RowCells reads a row's server-side Table cells by column name
	// (lower case), -o wide's included: DELIVERED-BY is only there.
	RowCells(ctx context.Context, namespace, name string) (map[string]string, error)
	// Events lists the Events about an object, oldest first.
	Events(ctx context.Context, namespace, kind, name string) ([]corev1.Event, error)
}

// Clients reads through the generated clientset and the core clientset.
type Clients struct {
	Courier versioned.Interface
	Kube    kubernetes.Interface
}

var _ Source = Clients{}

// ListSummaries lists the summaries of namespace.
func (c Clients) ListSummaries(ctx context.Context, namespace string) ([]v1alpha1.DownstreamCopySummary, error) {
	l, err := c.Courier.CourierV1alpha1().DownstreamCopySummaries(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, Explain(err, "list", "downstreamcopysummaries", namespace, "")
	}
	sort.Slice(l.Items, func(i, j int) bool {
		a, b := l.Items[i], l.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return l.Items, nil
}

// GetSummary reads one summary by name.
func (c Clients) GetSummary(ctx context.Context, namespace, name string) (*v1alpha1.DownstreamCopySummary, error) {
	s, err := c.Courier.CourierV1alpha1().DownstreamCopySummaries(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, Explain(err, "get", "downstreamcopysummaries", namespace, name)
	}
	return s, nil
}

// WatchSummary watches one summary, pinned by name.
func (c Clients) WatchSummary(ctx context.Context, namespace, name, rv string) (watch.Interface, error) {
	w, err := c.Courier.CourierV1alpha1().DownstreamCopySummaries(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv})
	if err != nil {
		return nil, Explain(err, "watch", "downstreamcopysummaries", namespace, "")
	}
	return w, nil
}

// ListRows lists the rows of namespace matching selector, in one call.
func (c Clients) ListRows(ctx context.Context, namespace string, selector fields.Selector) ([]v1alpha1.DownstreamCopy, error) {
	opts := metav1.ListOptions{}
	if selector != nil && !selector.Empty() {
		opts.FieldSelector = selector.String()
	}
	l, err := c.Courier.CourierV1alpha1().DownstreamCopies(namespace).List(ctx, opts)
	if err != nil {
		return nil, Explain(err, "list", "downstreamcopies", namespace, "")
	}
	return l.Items, nil
}

// GetRow reads one row.
func (c Clients) GetRow(ctx context.Context, namespace, name string) (*v1alpha1.DownstreamCopy, error) {
	r, err := c.Courier.CourierV1alpha1().DownstreamCopies(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, Explain(err, "get", "downstreamcopies", namespace, name)
	}
	return r, nil
}

// RowCells reads a row as a server-side Table.
func (c Clients) RowCells(ctx context.Context, namespace, name string) (map[string]string, error) {
	var t metav1.Table
	err := c.Courier.CourierV1alpha1().RESTClient().Get().Namespace(namespace).Resource("downstreamcopies").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(&t)
	if err != nil {
		return nil, Explain(err, "get", "downstreamcopies", namespace, name)
	}
	if len(t.Rows) != 1 {
		return nil, fmt.Errorf("the table of downstreamcopy %s/%s has %d rows", namespace, name, len(t.Rows))
	}
	cells := map[string]string{}
	for i, col := range t.ColumnDefinitions {
		if i < len(t.Rows[0].Cells) {
			cells[strings.ToLower(col.Name)] = fmt.Sprint(t.Rows[0].Cells[i])
		}
	}
	return cells, nil
}

// Events lists the Events about kind/name in namespace, oldest first.
func (c Clients) Events(ctx context.Context, namespace, kind, name string) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector()
	l, err := c.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil, Explain(err, "list", "events", namespace, "")
	}
	sort.SliceStable(l.Items, func(i, j int) bool { return eventTime(l.Items[i]).Before(eventTime(l.Items[j])) })
	return l.Items, nil
}

// eventTime is when an Event last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
