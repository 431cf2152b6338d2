package rows

import (
	"strings"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/engine"
	"github.com/courier-dev/courier/pkg/rowname"
)

// Denied tells the engine whether the row of a leftover copy is Denied,
// and its message: the engine then removes the copy even when it was
// written with keepResources (docs/design.md#export-safety). The server's
// view is the only writer of Denied (never an agent's report), and the
// row must also be labelled not delivered.
func (c *Controller) Denied(d engine.DeniedCopy) (string, bool) {
	name := rowname.Unique(d.Owner.Name, d.Cluster, strings.ToLower(d.Kind), d.Name)
	obj, exists, err := c.informer.GetIndexer().GetByKey(d.Owner.Namespace + "/" + name)
	if err != nil || !exists {
		return "", false
	}
	r, ok := obj.(*v1alpha1.DownstreamCopy)
	if !ok || r.Namespace != c.namespace || r.Spec.Cluster != c.cluster || courier.Delivered(r.Labels) ||
		string(r.Status.Phase) != string(courier.CopyPhaseDenied) || r.Spec.Target.Namespace != d.TargetNamespace {
		return "", false
	}
	return r.Status.Message, true
}
