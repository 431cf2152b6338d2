package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// HelmOp deploys a Helm chart to the clusters it targets. Courier reads the
// options that say which Secrets and ConfigMaps to copy, and where.
type HelmOp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HelmOpSpec `json:"spec,omitempty"`
}

// HelmOpSpec is the part of Fleet's HelmOpSpec (BundleSpec inlined, which
// inlines BundleDeploymentOptions) that Courier uses.
type HelmOpSpec struct {
	BundleDeploymentOptions `json:",inline"`

	// Targets are evaluated in order; the first that matches a cluster wins.
	Targets []BundleTarget `json:"targets,omitempty"`
}

// BundleDeploymentOptions are the options that apply at the root of a
// HelmOp and that a target may override.
type BundleDeploymentOptions struct {
	// DefaultNamespace is used when Namespace is empty.
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	// TargetNamespace, when set, is where every resource goes.
	TargetNamespace string `json:"namespace,omitempty"`
	// ServiceAccount the deployment runs as downstream.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// KeepResources keeps resources when the HelmOp is deleted or the cluster untargeted.
	KeepResources bool `json:"keepResources,omitempty"`
	// DownstreamResources lists Secrets and ConfigMaps to copy from the HelmOp's namespace.
	DownstreamResources []DownstreamResource `json:"downstreamResources,omitempty"`
}

// DownstreamResource names one resource to copy to each targeted cluster.
type DownstreamResource struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
}

// BundleTarget selects clusters and customises options for them.
type BundleTarget struct {
	BundleDeploymentOptions `json:",inline"`

	Name                 string                `json:"name,omitempty"`
	ClusterName          string                `json:"clusterName,omitempty"`
	ClusterSelector      *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	ClusterGroup         string                `json:"clusterGroup,omitempty"`
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
	DoNotDeploy          bool                  `json:"doNotDeploy,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// HelmOpList is a list of HelmOp.
type HelmOpList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []HelmOp `json:"items"`
}

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Cluster is a downstream cluster registered with Fleet.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterSpec `json:"spec,omitempty"`
}

// ClusterSpec is the part of Fleet's ClusterSpec that Courier uses.
type ClusterSpec struct {
	// KubeConfigSecret names a Secret whose key "value" holds a kubeconfig for the cluster.
	KubeConfigSecret string `json:"kubeConfigSecret,omitempty"`
	// KubeConfigSecretNamespace is the Secret's namespace; the Cluster's own when empty.
	KubeConfigSecretNamespace string `json:"kubeConfigSecretNamespace,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterList is a list of Cluster.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Cluster `json:"items"`
}

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterGroup is a named set of Clusters chosen by label.
type ClusterGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterGroupSpec `json:"spec,omitempty"`
}

// ClusterGroupSpec selects the group's Clusters.
type ClusterGroupSpec struct {
	// Selector picks Clusters in the group's namespace by label.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterGroupList is a list of ClusterGroup.
type ClusterGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterGroup `json:"items"`
}

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Bundle is what Fleet deploys: one per GitRepo path (from its fleet.yaml)
// and one per HelmOp. Courier reads only the options that say which
// Secrets and ConfigMaps to copy, and where; everything else in a Bundle
// (its resources, often the whole chart) is dropped when it is decoded, so
// the informer's cache holds only these fields.
type Bundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BundleSpec `json:"spec,omitempty"`
}

// TargetCustomizationModeAllMatches merges every matching targetCustomization
// in order; the default, FirstMatch, takes the first one only.
const TargetCustomizationModeAllMatches = "AllMatches"

// BundleSpec is the part of Fleet's BundleSpec that Courier uses.
type BundleSpec struct {
	BundleDeploymentOptions `json:",inline"`

	// Targets are the fleet.yaml targetCustomizations followed by the
	// GitRepo's targets (one per TargetRestriction) when TargetRestrictions
	// is set; otherwise all of them are plain targets.
	Targets []BundleTarget `json:"targets,omitempty"`
	// TargetRestrictions, when set, is the allow list of clusters (the
	// GitRepo's own targets).
	TargetRestrictions []BundleTargetRestriction `json:"targetRestrictions,omitempty"`
	// TargetCustomizationMode is FirstMatch (default) or AllMatches.
	TargetCustomizationMode string `json:"targetCustomizationMode,omitempty"`
}

// BundleTargetRestriction is one entry of a Bundle's allow list.
type BundleTargetRestriction struct {
	Name                 string                `json:"name,omitempty"`
	ClusterName          string                `json:"clusterName,omitempty"`
	ClusterSelector      *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	ClusterGroup         string                `json:"clusterGroup,omitempty"`
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// BundleList is a list of Bundle.
type BundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Bundle `json:"items"`
}

// Labels Fleet puts on a Bundle.
const (
	// LabelHelmOpName is on a Bundle made from a HelmOp; Courier reads that
	// HelmOp directly and ignores the Bundle.
	LabelHelmOpName = "fleet.cattle.io/fleet-helm-name"
	// LabelRepoName names the GitRepo a Bundle was made from.
	LabelRepoName = "fleet.cattle.io/repo-name"
)
