package downstreamcopy

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// Reporter keeps what agents report (clusterstatus.Store).
type Reporter interface {
	Record(ctx context.Context, cluster types.NamespacedName, row string, e clusterstatus.Entry, interval time.Duration) error
	// Holds reports whether the Cluster's report already says e of row.
	Holds(cluster types.NamespacedName, row string, e clusterstatus.Entry) bool
}

// DeniedNotes is told an agent's new note on a Denied row -- its copy
// written with keepResources removed, or Fleet's own copy found -- and
// records the Warning Event a pushed Cluster's engine records itself
// (docs/design.md#export-safety).
type DeniedNotes interface {
	Noted(row *courier.DownstreamCopy, note string)
}

var _ Reporter = &clusterstatus.Store{}

// StatusREST serves downstreamcopies/<row>/status, update only (docs/design.md#pull-delivery):
// the courier-agent of a pulled Cluster reports each row's outcome
// there, and its report carries the heartbeat that keeps the Cluster's
// rows from turning Unreachable.
//
// Only the agent of the row's Cluster may update it; anyone else, a
// cluster-admin included, gets 403: a row's status is what Courier or the
// agent observed, not something users set. Courier's authorizer already
// refuses everyone else; the storage checks again, as the payload does.
//
// Only the status fields phase, message, syncedResourceVersion and
// lastSyncTime, and the annotation courier.dev/report-interval, are read
// from the request (clusterstatus.FromStatusUpdate); the rest of the object,
// resourceVersion included, is ignored: the agent is the row status's only
// writer, and the last report wins. There is no get (and so no patch): the
// row itself is read from downstreamcopies.
type StatusREST struct {
	rows    *memstore.Store[*courier.DownstreamCopy]
	agents  AgentChecker
	reports Reporter
	notes   DeniedNotes
}

var (
	_ rest.Storage = &StatusREST{}
	_ rest.Updater = &StatusREST{}
)

// NewStatusREST returns the status subresource over the rows in store;
// notes (nil: none) is told the new notes on Denied rows.
func NewStatusREST(store *memstore.Store[*courier.DownstreamCopy], agents AgentChecker, reports Reporter, notes DeniedNotes) *StatusREST {
	return &StatusREST{rows: store, agents: agents, reports: reports, notes: notes}
}

// New implements rest.Storage.
func (r *StatusREST) New() runtime.Object { return &courier.DownstreamCopy{} }

// Destroy implements rest.Storage.
func (r *StatusREST) Destroy() {}

// Update implements rest.Updater: it records the agent's report and
// returns the row with the status it will show with this report
// (rowstatus.Reported): the reported one, unless the view decided
// the row's phase itself (Invalid, SourceMissing, Denied, Kept,
// Deleting). The row as listed shows it once every replica's view has
// read the report, within moments.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc,
	_ rest.ValidateObjectUpdateFunc, _ bool, _ *metav1.UpdateOptions) (runtime.Object, bool, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	row, ok := r.rows.Get(ns, name)
	if !ok {
		return nil, false, apierrors.NewNotFound(payloadResource, name)
	}
	cluster := types.NamespacedName{Namespace: ns, Name: row.Spec.Cluster}
	u, _ := genericapirequest.UserFrom(ctx)
	if r.agents == nil || !r.agents.IsAgentOf(u, ns, row.Spec.Cluster) {
		return nil, false, apierrors.NewForbidden(courier.Resource("downstreamcopies/status"), name, fmt.Errorf(
			"the status of a row is reported only by the courier-agent of its Cluster %s", cluster))
	}
	obj, err := objInfo.UpdatedObject(ctx, row)
	if err != nil {
		return nil, false, err
	}
	in, ok := obj.(*courier.DownstreamCopy)
	if !ok {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("not a DownstreamCopy: %T", obj))
	}
	entry, interval, errs := clusterstatus.FromStatusUpdate(in)
	if len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(courier.Kind("DownstreamCopy"), name, errs)
	}
	denied := !courier.Delivered(row.Labels) && row.Status.Phase == courier.CopyPhaseDenied
	if entry.Phase == courier.CopyPhaseDenied && !denied {
		return nil, false, apierrors.NewInvalid(courier.Kind("DownstreamCopy"), name, field.ErrorList{field.Forbidden(field.NewPath("status", "phase"),
			"Denied is reported only with a note on a row Courier's view made Denied")})
	}
	newNote := denied && entry.Phase == courier.CopyPhaseDenied && entry.Message != "" && !r.reports.Holds(cluster, name, entry)
	if err := r.reports.Record(ctx, cluster, name, entry, interval); err != nil {
		if _, isAPI := err.(apierrors.APIStatus); isAPI {
			return nil, false, err
		}
		return nil, false, apierrors.NewInternalError(fmt.Errorf("keeping the report of Cluster %s: %w", cluster, err))
	}
	if newNote && r.notes != nil {
		r.notes.Noted(row, entry.Message)
	}
	// The answer is the row as the view will show it with this report,
	// composed by the view's one composer.
	row.Status = rowstatus.Reported(row, copycontract.Status{Phase: entry.Phase, Message: entry.Message,
		SyncedResourceVersion: entry.SyncedResourceVersion, LastSyncTime: entry.LastSyncTime})
	return row, false, nil
}
