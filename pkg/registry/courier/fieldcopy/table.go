package fieldcopy

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// columns are the Table columns of fieldcopies; Priority 1 columns appear
// only with kubectl's -o wide.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Target", Type: "string", Description: "The annotated object, in this object's namespace, as kind/name."},
	{Name: "Path", Type: "string", Description: "The path in the target that the rule writes."},
	{Name: "Source", Type: "string", Description: "The object and path the rule reads from, as resource:namespace/name:path, or \"json literal\" for a JSON literal written in the annotation."},
	{Name: "Mode", Type: "string", Description: "Replace, or Merge (JSON merge patch onto the destination)."},
	{Name: "Phase", Type: "string", Description: "Where the rule stands: Applied, SourceMissing, Invalid, Refused, Failed or Pending."},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "Message", Type: "string", Priority: 1, Description: "Why the rule is in its phase."},
}

// cells returns one row's cells, in columns order.
func cells(o *courier.FieldCopy, name, age string) []interface{} {
	return []interface{}{
		name,
		target(o),
		o.Spec.DestinationPath,
		source(o),
		string(o.Spec.Mode),
		string(o.Status.Phase),
		age,
		o.Status.Message,
	}
}

// target shows the target as kind/name, or nothing when it is unset (as on
// a bookmark).
func target(o *courier.FieldCopy) string {
	if o.Spec.Target.Kind == "" && o.Spec.Target.Name == "" {
		return ""
	}
	return o.Spec.Target.Kind + "/" + o.Spec.Target.Name
}

// source shows where the rule reads from in the annotation's own syntax,
// RESOURCE:NAMESPACE/NAME:PATH (RESOURCE:NAME:PATH without a namespace), or
// "json literal".
func source(o *courier.FieldCopy) string {
	switch s := o.Spec.Source; {
	case s != nil && s.Namespace != "":
		return fmt.Sprintf("%s:%s/%s:%s", s.Resource, s.Namespace, s.Name, s.Path)
	case s != nil:
		return fmt.Sprintf("%s:%s:%s", s.Resource, s.Name, s.Path)
	case o.Spec.Literal:
		return "json literal"
	}
	return ""
}
