// Package rowstatus holds the rules of a row's status
// (docs/design.md#phases): the base status the view
// decides from a row's spec, the one composer that lays what a row's
// deliverer says over that base, its precedence table, and when a silent
// agent's rows turn Unreachable. It is pure: the view (pkg/copyview) and
// the status endpoint (pkg/registry/courier/downstreamcopy) both call it,
// so that what the endpoint answers an agent is what the view will show.
package rowstatus

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

const (
	// DefaultInterval is the report interval of an agent that declares
	// none (a report without the courier.dev/report-interval annotation):
	// the agent's default --report-interval.
	DefaultInterval = 30 * time.Second
	// MissedIntervals is how many report intervals without a heartbeat
	// make a pulled Cluster's rows Unreachable.
	MissedIntervals = 3
)

// Base is a row's status from its spec alone, before anything the engine
// recorded, by the contract's rules: Invalid for a spec no copy can be
// written for (copycontract.Invalid), SourceMissing when the source does
// not exist, else Pending (copycontract.Copyable).
func Base(namespace string, spec courier.DownstreamCopySpec) courier.DownstreamCopyStatus {
	if why := copycontract.Invalid(spec); why != "" {
		return New(courier.CopyPhaseInvalid, why)
	}
	kind, _ := copycontract.SupportedKind(spec.Source.Kind)
	// Concatenated, not formatted: every row of a changed source gets its
	// base status on every replica, and fmt was most of its cost.
	source := kind + " " + namespace + "/" + spec.Source.Name
	if copycontract.SourceMissing(spec) {
		return New(courier.CopyPhaseSourceMissing, source+" does not exist")
	}
	return New(courier.CopyPhasePending, source+" is not copied to cluster "+spec.Cluster+" yet")
}

// New returns a status with the given phase and a Ready condition that
// says the same. LastTransitionTime is filled in by whoever keeps history.
func New(phase courier.CopyPhase, message string) courier.DownstreamCopyStatus {
	ready := metav1.ConditionFalse
	if phase == courier.CopyPhaseSynced || phase == courier.CopyPhaseKept {
		ready = metav1.ConditionTrue
	}
	return courier.DownstreamCopyStatus{
		Phase:   phase,
		Message: message,
		Conditions: []metav1.Condition{{
			Type:    courier.ConditionReady,
			Status:  ready,
			Reason:  string(phase),
			Message: message,
		}},
	}
}
