package load

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

// ErrNotFound is wrapped by the error of an owner or row that does not exist.
var ErrNotFound = errors.New("not found")

// APIService is the name of Courier's APIService.
const APIService = "v1alpha1.courier.dev"

// Explain turns an API error of verb on resource (name, when a single
// object was asked for) into a message that says what is wrong and what
// to do: Courier's API not served, not Available, a right missing, or the
// object not there. Other errors pass through with what was asked.
func Explain(err error, verb, resource, namespace, name string) error {
	where := "in every namespace"
	if namespace != "" {
		where = fmt.Sprintf("in namespace %q", namespace)
	}
	group := resource
	if resource != "events" {
		group = resource + "." + v1alpha1.GroupName
	}
	switch {
	case apierrors.IsNotFound(err) && name != "" && notFoundIsObject(err, name):
		return fmt.Errorf("%s %q %s: %w", resource, name, where, ErrNotFound)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("this cluster does not serve %s (%s): Courier's API is not installed here (no APIService %s); "+
			"install Courier (helm install courier artifacts/chart -n courier-system --create-namespace, see docs/install.md), "+
			"or point --kubeconfig/--context at the management cluster: %v", group, v1alpha1.SchemeGroupVersion, APIService, err)
	case apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) && strings.Contains(err.Error(), APIService):
		return fmt.Errorf("Courier's API is installed but not Available (%v): kubectl get apiservice %s shows why; see docs/troubleshooting.md", err, APIService)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("forbidden: you may not %s %s %s (%v); the aggregated view role of artifacts/rbac/aggregated-roles.yaml grants it, see docs/rbac.md",
			verb, group, where, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("unauthorized: the cluster did not accept your credentials when asked to %s %s: %v", verb, group, err)
	}
	return fmt.Errorf("%s %s %s: %w", verb, group, where, err)
}

// notFoundIsObject tells a 404 about the object (it does not exist) from
// a 404 about the resource (the API is not served): the former is a Status
// the API server wrote, naming the object; the latter is the aggregator's
// bare "404 page not found", which client-go turns into its generic
// message.
func notFoundIsObject(err error, name string) bool {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		return false
	}
	st := s.Status()
	return st.Details != nil && st.Details.Name == name && !strings.HasPrefix(st.Message, genericNotFound)
}

// genericNotFound is client-go's message for a 404 without a Status body.
const genericNotFound = "the server could not find the requested resource"

// Owner names a HelmOp or a Bundle as the commands take it: "app" for a
// HelmOp, "bundle:web" for a Bundle (the summaries' names).
type Owner struct {
	Kind v1alpha1.OwnerKind
	Name string
}

// ParseOwner reads an OWNER argument.
func ParseOwner(s string) (Owner, error) {
	if s == "" {
		return Owner{}, errors.New("the owner is empty: give a HelmOp's name, or bundle:<name> for a Bundle")
	}
	if name, ok := strings.CutPrefix(s, "bundle:"); ok {
		if name == "" {
			return Owner{}, fmt.Errorf("owner %q names no Bundle", s)
		}
		return Owner{v1alpha1.OwnerKindBundle, name}, nil
	}
	if strings.Contains(s, ":") || strings.Contains(s, "/") {
		return Owner{}, fmt.Errorf("owner %q: give a HelmOp's name, or bundle:<name> for a Bundle", s)
	}
	return Owner{v1alpha1.OwnerKindHelmOp, s}, nil
}

// SummaryName is the name of the owner's summary.
func (o Owner) SummaryName() string {
	if o.Kind == v1alpha1.OwnerKindBundle {
		return "bundle:" + o.Name
	}
	return o.Name
}

// String is how the commands name the owner: HelmOp "app" or Bundle "web".
func (o Owner) String() string { return fmt.Sprintf("%s %q", o.Kind, o.Name) }

// Rows is the field selector of the owner's rows.
func (o Owner) Rows() fields.Selector {
	return fields.Set{"spec.owner.kind": string(o.Kind), "spec.owner.name": o.Name}.AsSelector()
}

// OwnerOf returns the owner of a row.
func OwnerOf(r *v1alpha1.DownstreamCopy) Owner {
	o := Owner{r.Spec.Owner.Kind, r.Spec.Owner.Name}
	if o.Kind == "" {
		o = Owner{v1alpha1.OwnerKindHelmOp, r.Spec.HelmOp}
	}
	return o
}
