// +k8s:deepcopy-gen=package
// +groupName=courier.dev

// Package courier is the internal version of the courier.dev API group:
// DownstreamCopy and FieldCopy, views computed by Courier and never stored.
package courier
