// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/courier-dev/courier/pkg/apis/courier
// +k8s:defaulter-gen=TypeMeta
// +groupName=courier.dev
// +k8s:openapi-model-package=dev.courier.v1alpha1

// Package v1alpha1 is version v1alpha1 of the courier.dev API group, served
// by Courier's aggregated API server.
package v1alpha1
