// Package why explains one row for `kubectl courier why`: its phase and
// message, what to do (looked up in pkg/troubleshoot, the table
// docs/troubleshooting.md is generated from), the source's version
// against the copy's, who delivers it, whether Courier reaches the
// Cluster, and the last Events about it.
package why

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// Target names the row to explain: by name, or by owner, Cluster and
// source ([Kind/]name).
type Target struct {
	Row     string
	Owner   load.Owner
	Cluster string
	Source  string
}

// Facts is what Render explains.
type Facts struct {
	Row *v1alpha1.DownstreamCopy
	// DeliveredBy is the row's DELIVERED-BY cell (empty when the server
	// did not say).
	DeliveredBy string
	// ClusterRows are the rows of the row's Cluster in its namespace.
	ClusterRows []v1alpha1.DownstreamCopy
	// Events are the Events about the row's owner that name its Cluster.
	Events []corev1.Event
	// EventsErr is why Events could not be read, if so; the rest stands.
	EventsErr error
}

// Gather reads the facts: the row (one GET, or one list by owner,
// Cluster and source), its table cells, its Cluster's rows (one list) and
// its owner's Events (one list).
func Gather(ctx context.Context, src load.Source, namespace string, t Target) (*Facts, error) {
	row, err := find(ctx, src, namespace, t)
	if err != nil {
		return nil, err
	}
	f := &Facts{Row: row}
	if cells, err := src.RowCells(ctx, namespace, row.Name); err == nil {
		f.DeliveredBy = cells["delivered-by"]
	}
	if f.ClusterRows, err = src.ListRows(ctx, namespace, fields.OneTermEqualSelector("spec.cluster", row.Spec.Cluster)); err != nil {
		return nil, err
	}
	owner := load.OwnerOf(row)
	events, err := src.Events(ctx, namespace, string(owner.Kind), owner.Name)
	if err != nil {
		f.EventsErr = err
	}
	for _, e := range events {
		if strings.Contains(e.Message, "cluster "+row.Spec.Cluster) && strings.Contains(e.Message, row.Spec.Source.Kind+" ") &&
			strings.Contains(e.Message, row.Spec.Source.Name) {
			f.Events = append(f.Events, e)
		}
	}
	return f, nil
}

func find(ctx context.Context, src load.Source, namespace string, t Target) (*v1alpha1.DownstreamCopy, error) {
	if t.Row != "" {
		row, err := src.GetRow(ctx, namespace, t.Row)
		if errors.Is(err, load.ErrNotFound) {
			return nil, fmt.Errorf("no downstreamcopy %q in namespace %s (kubectl get dcp -n %s lists them; or name it as OWNER CLUSTER SOURCE)", t.Row, namespace, namespace)
		}
		return row, err
	}
	set := fields.Set{"spec.owner.kind": string(t.Owner.Kind), "spec.owner.name": t.Owner.Name, "spec.cluster": t.Cluster}
	kind, name, ok := strings.Cut(t.Source, "/")
	if !ok {
		kind, name = "", t.Source
	}
	set["spec.source.name"] = name
	rows, err := src.ListRows(ctx, namespace, set.AsSelector())
	if err != nil {
		return nil, err
	}
	var match []*v1alpha1.DownstreamCopy
	for i := range rows {
		if kind == "" || strings.EqualFold(rows[i].Spec.Source.Kind, kind) {
			match = append(match, &rows[i])
		}
	}
	switch len(match) {
	case 0:
		return nil, fmt.Errorf("%s has no copy of %s for Cluster %s in namespace %s (kubectl courier status %s -n %s shows its rows)",
			t.Owner, t.Source, t.Cluster, namespace, t.Owner.SummaryName(), namespace)
	case 1:
		return match[0], nil
	}
	var kinds []string
	for _, r := range match {
		kinds = append(kinds, r.Spec.Source.Kind+"/"+r.Spec.Source.Name)
	}
	return nil, fmt.Errorf("%q names %d sources (%s): say which, e.g. %s", t.Source, len(match), strings.Join(kinds, ", "), kinds[0])
}
