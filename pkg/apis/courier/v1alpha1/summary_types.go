package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:readonly
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopySummary sums up the rows of one owner (a HelmOp or a
// Bundle): how many Clusters and copies are synced at their sources'
// current versions, how many fail and why. It is computed from the rows,
// never stored, and never holds copied data nor anything derived from it.
// Its Ready condition is what `kubectl wait --for=condition=Ready
// dcs/<name>` waits for after a source changed.
type DownstreamCopySummary struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. A HelmOp's summary has the HelmOp's name; a
	// Bundle's is named bundle:<bundle name>.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the owner.
	// +optional
	Spec DownstreamCopySummarySpec `json:"spec,omitempty"`
	// Status sums up the owner's rows.
	// +optional
	Status DownstreamCopySummaryStatus `json:"status,omitempty"`
}

// DownstreamCopySummarySpec names the owner a summary is about.
type DownstreamCopySummarySpec struct {
	// Owner is the HelmOp or Bundle, in this object's namespace.
	Owner CopyOwner `json:"owner"`
	// GitRepo is the GitRepo the owning Bundle was made from, if any.
	// +optional
	GitRepo string `json:"gitRepo,omitempty"`
}

// DownstreamCopySummaryStatus sums up an owner's rows.
type DownstreamCopySummaryStatus struct {
	// Clusters is how many Clusters the owner targets (Clusters with a row
	// that is not a leftover, Kept or Deleting).
	Clusters int32 `json:"clusters"`
	// ReadyClusters is how many of them have every copy Synced at its
	// source's current resourceVersion.
	ReadyClusters int32 `json:"readyClusters"`
	// Copies is how many rows are wanted (leftovers aside).
	Copies int32 `json:"copies"`
	// SyncedCopies is how many of them are Synced at their source's current resourceVersion.
	SyncedCopies int32 `json:"syncedCopies"`
	// Failing is how many rows are in a phase that needs someone to act:
	// Forbidden, Conflict, Denied, Invalid, Unreachable or SourceMissing.
	Failing int32 `json:"failing"`
	// Phases counts every row, leftovers included, by phase.
	// +optional
	Phases map[string]int32 `json:"phases,omitempty"`
	// Sources are the listed sources with their current resourceVersion
	// and how many copies are synced at it: the progress of a rotation.
	// +optional
	// +listType=atomic
	Sources []SummarySource `json:"sources,omitempty"`
	// NonReady are at most 10 rows that are not Synced at their source's
	// current resourceVersion, most severe first, then by Cluster.
	// +optional
	// +listType=atomic
	NonReady []NonReadyCopy `json:"nonReady,omitempty"`
	// Incomplete is true when more rows are not ready than NonReady holds.
	// +optional
	Incomplete bool `json:"incomplete,omitempty"`
	// Message sums up what is not ready, in Fleet's style:
	// Forbidden(7) [Cluster fleet-default/a: ...].
	// +optional
	Message string `json:"message,omitempty"`
	// Conditions hold the Ready condition.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SummarySource is one listed source and how far its copies are.
type SummarySource struct {
	// Kind is Secret or ConfigMap.
	Kind string `json:"kind"`
	// Name is the source's name.
	Name string `json:"name"`
	// ResourceVersion is the source's resourceVersion upstream, as of the
	// summary; empty when it does not exist.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Copies is how many rows copy this source (leftovers aside).
	Copies int32 `json:"copies"`
	// SyncedCopies is how many of them are Synced at ResourceVersion.
	SyncedCopies int32 `json:"syncedCopies"`
}

// NonReadyCopy is one row that is not Synced at its source's current resourceVersion.
type NonReadyCopy struct {
	// Name is the DownstreamCopy's name.
	Name string `json:"name"`
	// Cluster is the Fleet Cluster's name.
	Cluster string `json:"cluster"`
	// Source is the source's kind and name.
	Source CopySource `json:"source"`
	// Phase is the row's phase.
	Phase CopyPhase `json:"phase"`
	// Message is the row's message.
	// +optional
	Message string `json:"message,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopySummaryList is a list of DownstreamCopySummary.
type DownstreamCopySummaryList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the summaries.
	Items []DownstreamCopySummary `json:"items"`
}
