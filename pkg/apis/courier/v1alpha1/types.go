package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CopyPhase is where one copy of one source in one downstream cluster stands.
//
// +enum
type CopyPhase string

// The phases of a DownstreamCopy.
const (
	// CopyPhasePending: the copy is wanted and has not been written yet.
	CopyPhasePending CopyPhase = "Pending"
	// CopyPhaseSynced: the downstream copy matches its source.
	CopyPhaseSynced CopyPhase = "Synced"
	// CopyPhaseSourceMissing: the source does not exist upstream.
	CopyPhaseSourceMissing CopyPhase = "SourceMissing"
	// CopyPhaseForbidden: the ServiceAccount may not write the copy.
	CopyPhaseForbidden CopyPhase = "Forbidden"
	// CopyPhaseConflict: an object of the same name that Courier does not own exists downstream.
	CopyPhaseConflict CopyPhase = "Conflict"
	// CopyPhaseUnreachable: the downstream cluster cannot be reached.
	CopyPhaseUnreachable CopyPhase = "Unreachable"
	// CopyPhaseInvalid: the entry cannot be copied (for example an unsupported kind).
	CopyPhaseInvalid CopyPhase = "Invalid"
	// CopyPhaseDeleting: the copy is no longer wanted and is being removed.
	CopyPhaseDeleting CopyPhase = "Deleting"
	// CopyPhaseKept: the copy is no longer wanted and stays because of keepResources.
	CopyPhaseKept CopyPhase = "Kept"
	// CopyPhaseDenied: the source may never be exported (a Cluster's kubeconfig, a credential
	// Secret type or content, or annotated courier.dev/export: "false"); nothing is written,
	// and a copy made before is removed, also one written with keepResources.
	CopyPhaseDenied CopyPhase = "Denied"
)

// ConditionReady is the condition type that summarises a row.
const ConditionReady = "Ready"

// +genclient
// +genclient:onlyVerbs=get,list,watch,updateStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopy is the status of one resource listed in a HelmOp's
// downstreamResources, in one downstream cluster the HelmOp targets. It is
// computed by Courier on every request and never stored; it never holds the
// copied data nor anything derived from it.
type DownstreamCopy struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is <helmop>.<cluster>.<kind>.<name>
	// in lower case, hashed when longer than 253 characters.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what is copied where, and as whom.
	// +optional
	Spec DownstreamCopySpec `json:"spec,omitempty"`
	// Status is what Courier last observed of the copy.
	// +optional
	Status DownstreamCopyStatus `json:"status,omitempty"`
}

// DownstreamCopySpec says what is copied where, and as whom.
type DownstreamCopySpec struct {
	// Owner is the fleet.cattle.io object, in this object's namespace, that lists the source: a HelmOp or a Bundle.
	// +optional
	Owner CopyOwner `json:"owner,omitempty"`
	// HelmOp is the name of the HelmOp that lists the source; empty when the owner is a Bundle.
	// +optional
	HelmOp string `json:"helmOp,omitempty"`
	// GitRepo is the GitRepo the owning Bundle was made from (its fleet.cattle.io/repo-name label), if any.
	// +optional
	GitRepo string `json:"gitRepo,omitempty"`
	// Cluster is the name of the fleet.cattle.io Cluster the copy goes to.
	Cluster string `json:"cluster"`
	// Source is the upstream object, in the HelmOp's namespace.
	Source CopySource `json:"source"`
	// Target is where the copy lives in the downstream cluster.
	Target CopyTarget `json:"target"`
	// ServiceAccount is the downstream ServiceAccount the copy is written as,
	// as <namespace>/<name>; empty when Courier writes with its own identity.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// KeepResources is true when the copy stays after the cluster is no longer targeted.
	// +optional
	KeepResources bool `json:"keepResources,omitempty"`
}

// OwnerKind is the kind of object whose list names a source.
//
// +enum
type OwnerKind string

// The kinds of owner.
const (
	// OwnerKindHelmOp: a fleet.cattle.io HelmOp.
	OwnerKindHelmOp OwnerKind = "HelmOp"
	// OwnerKindBundle: a fleet.cattle.io Bundle not made from a HelmOp (for example from a GitRepo's fleet.yaml).
	OwnerKindBundle OwnerKind = "Bundle"
)

// CopyOwner names the HelmOp or Bundle whose downstreamResources list a source.
type CopyOwner struct {
	// Kind is HelmOp or Bundle.
	Kind OwnerKind `json:"kind"`
	// Name is the owner's name, in the row's namespace.
	Name string `json:"name"`
}

// CopySource names the upstream object, in the HelmOp's namespace.
type CopySource struct {
	// Kind is Secret or ConfigMap as listed in the HelmOp (any other kind is Invalid).
	Kind string `json:"kind"`
	// Name is the source object's name.
	Name string `json:"name"`
	// ResourceVersion is the source's current resourceVersion upstream; empty when it does not exist.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// CopyTarget names the object in the downstream cluster.
type CopyTarget struct {
	// Namespace is the destination namespace: the target's namespace, else its defaultNamespace, else "default".
	Namespace string `json:"namespace"`
	// Name is the destination object's name, the same as the source's.
	Name string `json:"name"`
}

// DownstreamCopyStatus is what Courier last observed of the copy.
type DownstreamCopyStatus struct {
	// Phase is where the copy stands: Pending, Synced, SourceMissing,
	// Forbidden, Conflict, Unreachable, Invalid, Deleting or Kept.
	// +optional
	Phase CopyPhase `json:"phase,omitempty"`
	// SyncedResourceVersion is the source resourceVersion the downstream copy was made from.
	// +optional
	SyncedResourceVersion string `json:"syncedResourceVersion,omitempty"`
	// LastSyncTime is when the downstream copy was last written or confirmed current.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// Message says why the copy is in its phase, in words meant for people.
	// +optional
	Message string `json:"message,omitempty"`
	// Conditions hold the Ready condition.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DownstreamCopyList is a list of DownstreamCopy.
type DownstreamCopyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the rows.
	Items []DownstreamCopy `json:"items"`
}

// FieldCopyPhase is where one field-copy rule stands.
//
// +enum
type FieldCopyPhase string

// The phases of a FieldCopy.
const (
	// FieldCopyPhaseApplied: the destination holds the source's value.
	FieldCopyPhaseApplied FieldCopyPhase = "Applied"
	// FieldCopyPhaseSourceMissing: the source object or path does not exist.
	FieldCopyPhaseSourceMissing FieldCopyPhase = "SourceMissing"
	// FieldCopyPhaseInvalid: the rule cannot be parsed or resolved.
	FieldCopyPhaseInvalid FieldCopyPhase = "Invalid"
	// FieldCopyPhaseRefused: the rule is not allowed (for example a cross-namespace source).
	FieldCopyPhaseRefused FieldCopyPhase = "Refused"
	// FieldCopyPhaseFailed: writing the destination failed.
	FieldCopyPhaseFailed FieldCopyPhase = "Failed"
	// FieldCopyPhasePending: the destination does not hold the source's
	// value yet; the leader writes it (shown by replicas that are not leading).
	FieldCopyPhasePending FieldCopyPhase = "Pending"
)

// FieldCopyMode says how a source value is applied to the destination path.
//
// +enum
type FieldCopyMode string

// The modes of a field copy.
const (
	// FieldCopyModeReplace replaces the destination with the source value.
	FieldCopyModeReplace FieldCopyMode = "Replace"
	// FieldCopyModeMerge applies the source value as a JSON merge patch onto the destination.
	FieldCopyModeMerge FieldCopyMode = "Merge"
)

// +genclient
// +genclient:readonly
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FieldCopy is the status of one k8s-copier style rule on one target object.
// It is computed, never stored, and never holds the copied value.
type FieldCopy struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is <target-kind>.<target-name>.<destination-path> in lower case.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the rule as Courier parsed it.
	// +optional
	Spec FieldCopySpec `json:"spec,omitempty"`
	// Status is what Courier last observed of the rule.
	// +optional
	Status FieldCopyStatus `json:"status,omitempty"`
}

// FieldCopySpec is the rule as Courier parsed it.
type FieldCopySpec struct {
	// Target is the annotated object, in this object's namespace.
	Target FieldCopyTarget `json:"target"`
	// DestinationPath is the path in the target that the rule writes.
	DestinationPath string `json:"destinationPath"`
	// Source is the object and path the rule reads from; unset for a literal.
	// +optional
	Source *FieldCopySource `json:"source,omitempty"`
	// Literal is true when the rule sets a JSON literal written in the annotation.
	// +optional
	Literal bool `json:"literal,omitempty"`
	// Mode is Replace or Merge (JSON merge patch onto the destination).
	// +optional
	Mode FieldCopyMode `json:"mode,omitempty"`
}

// FieldCopyTarget is the annotated object.
type FieldCopyTarget struct {
	// APIVersion of the target.
	APIVersion string `json:"apiVersion"`
	// Kind of the target.
	Kind string `json:"kind"`
	// Name of the target.
	Name string `json:"name"`
}

// FieldCopySource is the object and path a rule reads from.
type FieldCopySource struct {
	// Resource as written in the rule: singular, plural or kind, with optional .VERSION.GROUP.
	Resource string `json:"resource"`
	// Namespace of the source object.
	Namespace string `json:"namespace"`
	// Name of the source object.
	Name string `json:"name"`
	// Path in the source object, dot-separated, with bracketed keys for names holding dots.
	Path string `json:"path"`
}

// FieldCopyStatus is what Courier last observed of the rule.
type FieldCopyStatus struct {
	// Phase is Applied, SourceMissing, Invalid, Refused, Failed or Pending.
	// +optional
	Phase FieldCopyPhase `json:"phase,omitempty"`
	// Message says why the rule is in its phase.
	// +optional
	Message string `json:"message,omitempty"`
	// LastAppliedTime is when the destination was last written or confirmed current.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`
	// Conditions hold the Ready condition.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FieldCopyList is a list of FieldCopy.
type FieldCopyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the rows.
	Items []FieldCopy `json:"items"`
}
