package copyview

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// EngineStatus is what the copy engine observed for one row.
type EngineStatus struct {
	Phase                 courier.CopyPhase
	Message               string
	SyncedResourceVersion string
	LastSyncTime          *metav1.Time
}

// Engine is the copy engine as the view sees it: it is told the rows, and
// reports what happened to each. Defined here, where it is used, so the
// view does not depend on the engine's implementation.
type Engine interface {
	// SetDesired receives every row (with the phase the view computed) after
	// each recompute. It must not keep the rows.
	SetDesired(rows []*courier.DownstreamCopy)
	// Status returns the engine's record for a row ("<namespace>/<name>").
	Status(rowKey string) (EngineStatus, bool)
}

// overlay replaces the view's own guess of a row's status with what the
// engine saw. Invalid rows keep their phase: the engine does not touch
// them. A SourceMissing row keeps its phase, and says so when a copy made
// earlier stays downstream.
func overlay(row *courier.DownstreamCopy, st EngineStatus) {
	switch row.Status.Phase {
	case courier.CopyPhasePending:
		s := status(st.Phase, st.Message)
		s.SyncedResourceVersion = st.SyncedResourceVersion
		s.LastSyncTime = st.LastSyncTime
		row.Status = s
	case courier.CopyPhaseSourceMissing:
		if st.SyncedResourceVersion == "" {
			return
		}
		s := status(courier.CopyPhaseSourceMissing, fmt.Sprintf("%s; the copy made from resourceVersion %s stays in cluster %s",
			row.Status.Message, st.SyncedResourceVersion, row.Spec.Cluster))
		s.SyncedResourceVersion = st.SyncedResourceVersion
		s.LastSyncTime = st.LastSyncTime
		row.Status = s
	}
}
