package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// DownstreamCopyFieldLabels are the field selectors downstreamcopies accept
// besides metadata.name and metadata.namespace (docs/design.md#the-downstreamcopy-view).
var DownstreamCopyFieldLabels = []string{
	"spec.helmOp", "spec.owner.kind", "spec.owner.name", "spec.gitRepo",
	"spec.cluster", "spec.source.kind", "spec.source.name", "status.phase",
}

// DownstreamCopySummaryFieldLabels are the field selectors
// downstreamcopysummaries accept besides metadata.name and
// metadata.namespace.
var DownstreamCopySummaryFieldLabels = []string{"spec.owner.kind", "spec.owner.name", "spec.gitRepo"}

// FieldCopyFieldLabels are the field selectors fieldcopies accept besides
// metadata.name and metadata.namespace.
var FieldCopyFieldLabels = []string{
	"spec.target.kind", "spec.target.name", "spec.destinationPath", "spec.mode", "status.phase",
}

// addFieldLabelConversions teaches the scheme which field selectors each kind
// accepts, so the API server rejects anything else with a clear error rather
// than silently ignoring it.
func addFieldLabelConversions(scheme *runtime.Scheme) error {
	for kind, allowed := range map[string][]string{
		"DownstreamCopy":        DownstreamCopyFieldLabels,
		"FieldCopy":             FieldCopyFieldLabels,
		"DownstreamCopySummary": DownstreamCopySummaryFieldLabels,
	} {
		allowed := allowed
		kind := kind
		err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind), func(label, value string) (string, string, error) {
			switch label {
			case "metadata.name", "metadata.namespace":
				return label, value, nil
			}
			for _, a := range allowed {
				if label == a {
					return label, value, nil
				}
			}
			return "", "", fmt.Errorf("field label %q is not supported for %s", label, kind)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
