package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group Courier serves.
const GroupName = "courier.dev"

// SchemeGroupVersion is the group version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder collects the functions that register this version.
	SchemeBuilder      runtime.SchemeBuilder
	localSchemeBuilder = &SchemeBuilder
	// AddToScheme registers this version's types, conversions, defaults and
	// field selectors with a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// Only hand-written functions are registered here; the generated files
	// register themselves, so the package compiles without them.
	localSchemeBuilder.Register(addKnownTypes, addFieldLabelConversions)
}

// Resource takes an unqualified resource and returns a group-qualified
// GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&DownstreamCopy{},
		&DownstreamCopyList{},
		&FieldCopy{},
		&FieldCopyList{},
		&DownstreamCopySummary{},
		&DownstreamCopySummaryList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
