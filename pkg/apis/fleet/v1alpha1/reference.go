package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ObjectReference is the object Events about a Fleet object (a HelmOp or
// a Bundle) are recorded on: a reference, since Fleet's types are not in
// the scheme Courier's event recorders are built with. uid and
// resourceVersion may be empty when the object is gone.
func ObjectReference(kind, namespace, name string, uid types.UID, resourceVersion string) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion:      SchemeGroupVersion.String(),
		Kind:            kind,
		Namespace:       namespace,
		Name:            name,
		UID:             uid,
		ResourceVersion: resourceVersion,
	}
}

// HelmOpReference is ObjectReference for a HelmOp.
func HelmOpReference(namespace, name string, uid types.UID, resourceVersion string) *corev1.ObjectReference {
	return ObjectReference("HelmOp", namespace, name, uid, resourceVersion)
}
