// +k8s:deepcopy-gen=package
// +groupName=fleet.cattle.io

// Package v1alpha1 holds Go types for the parts of Fleet's fleet.cattle.io
// v1alpha1 HelmOp, Cluster and ClusterGroup that Courier reads. They are
// JSON-compatible with Fleet's own CRDs; fields Courier does not use are
// left out and ignored when decoding (Courier never writes these objects).
package v1alpha1
