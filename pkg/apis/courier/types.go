package courier

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CopyPhase is where one copy of one source in one downstream cluster stands.
type CopyPhase string

// The phases of a DownstreamCopy (docs/design.md#the-downstreamcopy-view).
const (
	CopyPhasePending       CopyPhase = "Pending"
	CopyPhaseSynced        CopyPhase = "Synced"
	CopyPhaseSourceMissing CopyPhase = "SourceMissing"
	CopyPhaseForbidden     CopyPhase = "Forbidden"
	CopyPhaseConflict      CopyPhase = "Conflict"
	CopyPhaseUnreachable   CopyPhase = "Unreachable"
	CopyPhaseInvalid       CopyPhase = "Invalid"
	CopyPhaseDeleting      CopyPhase = "Deleting"
	CopyPhaseKept          CopyPhase = "Kept"
	CopyPhaseDenied        CopyPhase = "Denied"
)

// ConditionReady is the condition type that summarises a row.
const ConditionReady = "Ready"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopy is the status of one listed resource of one HelmOp in one
// targeted downstream cluster. It is computed, never stored, and never holds
// the copied data nor anything derived from it.
type DownstreamCopy struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   DownstreamCopySpec
	Status DownstreamCopyStatus
}

// DownstreamCopySpec says what is copied where, and as whom.
type DownstreamCopySpec struct {
	Owner          CopyOwner
	HelmOp         string
	GitRepo        string
	Cluster        string
	Source         CopySource
	Target         CopyTarget
	ServiceAccount string
	KeepResources  bool
}

// OwnerKind is the kind of object whose list names a source.
type OwnerKind string

// The kinds of owner.
const (
	OwnerKindHelmOp OwnerKind = "HelmOp"
	OwnerKindBundle OwnerKind = "Bundle"
)

// CopyOwner names the HelmOp or Bundle whose downstreamResources list a source.
type CopyOwner struct {
	Kind OwnerKind
	Name string
}

// CopySource names the upstream object, in the HelmOp's namespace.
type CopySource struct {
	Kind            string
	Name            string
	ResourceVersion string
}

// CopyTarget names the object in the downstream cluster.
type CopyTarget struct {
	Namespace string
	Name      string
}

// DownstreamCopyStatus is what Courier last observed of the copy.
type DownstreamCopyStatus struct {
	Phase                 CopyPhase
	SyncedResourceVersion string
	LastSyncTime          *metav1.Time
	Message               string
	Conditions            []metav1.Condition
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopyList is a list of DownstreamCopy.
type DownstreamCopyList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []DownstreamCopy
}

// FieldCopyPhase is where one field-copy rule stands.
type FieldCopyPhase string

// The phases of a FieldCopy (docs/design.md#field-copies).
const (
	FieldCopyPhaseApplied       FieldCopyPhase = "Applied"
	FieldCopyPhaseSourceMissing FieldCopyPhase = "SourceMissing"
	FieldCopyPhaseInvalid       FieldCopyPhase = "Invalid"
	FieldCopyPhaseRefused       FieldCopyPhase = "Refused"
	FieldCopyPhaseFailed        FieldCopyPhase = "Failed"
	// FieldCopyPhasePending: the destination does not hold the source's
	// value yet and this replica is not the leader, which writes it.
	FieldCopyPhasePending FieldCopyPhase = "Pending"
)

// FieldCopyMode says how a source value is applied to the destination path.
type FieldCopyMode string

// The modes of a field copy.
const (
	FieldCopyModeReplace FieldCopyMode = "Replace"
	FieldCopyModeMerge   FieldCopyMode = "Merge"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FieldCopy is the status of one k8s-copier style rule on one target object.
// It never holds the copied value.
type FieldCopy struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   FieldCopySpec
	Status FieldCopyStatus
}

// FieldCopySpec is the rule as Courier parsed it.
type FieldCopySpec struct {
	Target          FieldCopyTarget
	DestinationPath string
	// Source is set when the rule copies from another object.
	Source *FieldCopySource
	// Literal is true when the rule sets a JSON literal from its annotation.
	Literal bool
	Mode    FieldCopyMode
}

// FieldCopyTarget is the annotated object.
type FieldCopyTarget struct {
	APIVersion string
	Kind       string
	Name       string
}

// FieldCopySource is the object and path a rule reads from.
type FieldCopySource struct {
	Resource  string
	Namespace string
	Name      string
	Path      string
}

// FieldCopyStatus is what Courier last observed of the rule.
type FieldCopyStatus struct {
	Phase           FieldCopyPhase
	Message         string
	LastAppliedTime *metav1.Time
	Conditions      []metav1.Condition
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FieldCopyList is a list of FieldCopy.
type FieldCopyList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []FieldCopy
}
