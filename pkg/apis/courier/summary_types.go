package courier

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BundleSummaryPrefix starts the name of a Bundle's summary (docs/design.md#summaries):
// bundle:<bundle name>. No HelmOp's name holds a ":", so a HelmOp's summary
// (named like the HelmOp) and a Bundle's never collide.
const BundleSummaryPrefix = "bundle:"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopySummary sums up the rows of one owner (docs/design.md#summaries). It is
// computed, never stored, and never holds copied data.
type DownstreamCopySummary struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   DownstreamCopySummarySpec
	Status DownstreamCopySummaryStatus
}

// DownstreamCopySummarySpec names the owner a summary is about.
type DownstreamCopySummarySpec struct {
	Owner   CopyOwner
	GitRepo string
}

// DownstreamCopySummaryStatus sums up an owner's rows.
type DownstreamCopySummaryStatus struct {
	Clusters      int32
	ReadyClusters int32
	Copies        int32
	SyncedCopies  int32
	Failing       int32
	Phases        map[string]int32
	Sources       []SummarySource
	NonReady      []NonReadyCopy
	Incomplete    bool
	Message       string
	Conditions    []metav1.Condition
}

// SummarySource is one listed source and how far its copies are.
type SummarySource struct {
	Kind            string
	Name            string
	ResourceVersion string
	Copies          int32
	SyncedCopies    int32
}

// NonReadyCopy is one row that is not Synced at its source's current resourceVersion.
type NonReadyCopy struct {
	Name    string
	Cluster string
	Source  CopySource
	Phase   CopyPhase
	Message string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopySummaryList is a list of DownstreamCopySummary.
type DownstreamCopySummaryList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []DownstreamCopySummary
}
