package copyview

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/targeting"
)

// owner is what the view needs of a HelmOp or a Bundle whose
// downstreamResources it computes rows for (docs/design.md#inputs). Everything past
// owner-lookup treats both alike; the view's queue, its records and the
// engine know an owner by its key (copycontract.OwnerKey): a HelmOp's
// namespace/name, or namespace/bundle:<name> for a Bundle.
type owner struct {
	key     types.NamespacedName
	spec    courier.CopyOwner
	gitRepo string
	// ref is the object Events about the owner are recorded on.
	ref *corev1.ObjectReference
	// resolve targets the owner's Clusters (targeting.Resolve or
	// ResolveBundle).
	resolve func(clusters []*fleet.Cluster, groups []*fleet.ClusterGroup) ([]targeting.Match, []targeting.Problem)
}

// helmOpOwner is op as an owner.
func helmOpOwner(op *fleet.HelmOp) *owner {
	return &owner{
		key:  types.NamespacedName{Namespace: op.Namespace, Name: op.Name},
		spec: courier.CopyOwner{Kind: courier.OwnerKindHelmOp, Name: op.Name},
		ref:  fleet.ObjectReference("HelmOp", op.Namespace, op.Name, op.UID, op.ResourceVersion),
		resolve: func(clusters []*fleet.Cluster, groups []*fleet.ClusterGroup) ([]targeting.Match, []targeting.Problem) {
			return targeting.Resolve(op, clusters, groups)
		},
	}
}

// bundleOwner is b as an owner, or nil for a Bundle that is not one: a
// Bundle Fleet made from a HelmOp (the HelmOp is read directly, so nothing
// is copied twice).
func bundleOwner(b *fleet.Bundle) *owner {
	if !IsBundleOwner(b) {
		return nil
	}
	return &owner{
		key:     types.NamespacedName{Namespace: b.Namespace, Name: courier.BundleSummaryPrefix + b.Name},
		spec:    courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: b.Name},
		gitRepo: b.Labels[fleet.LabelRepoName],
		ref:     fleet.ObjectReference("Bundle", b.Namespace, b.Name, b.UID, b.ResourceVersion),
		resolve: func(clusters []*fleet.Cluster, groups []*fleet.ClusterGroup) ([]targeting.Match, []targeting.Problem) {
			return targeting.ResolveBundle(b, clusters, groups)
		},
	}
}

// IsBundleOwner reports whether a Bundle owns rows: every Bundle except
// those made from a HelmOp (label fleet.cattle.io/fleet-helm-name).
func IsBundleOwner(b *fleet.Bundle) bool {
	_, fromHelmOp := b.Labels[fleet.LabelHelmOpName]
	return !fromHelmOp
}

// isBundleKey reports whether an owner key names a Bundle.
func isBundleKey(key types.NamespacedName) bool {
	return strings.HasPrefix(key.Name, courier.BundleSummaryPrefix)
}

// getOwner looks up the owner a key names; nil when it is gone or is a
// Bundle that owns nothing (or Bundles are not read).
func (c *Controller) getOwner(key types.NamespacedName) (*owner, error) {
	if isBundleKey(key) {
		if c.inputs.Bundles == nil {
			return nil, nil
		}
		name := copycontract.OwnerOf(key).Name
		b, err := c.inputs.Bundles.Bundles(key.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return bundleOwner(b), nil
	}
	op, err := c.inputs.HelmOps.HelmOps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return helmOpOwner(op), nil
}

// ownerKeys lists the keys of every owner in namespace ("" for all).
func (c *Controller) ownerKeys(namespace string) ([]types.NamespacedName, error) {
	var keys []types.NamespacedName
	ops, err := c.inputs.HelmOps.HelmOps(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		keys = append(keys, types.NamespacedName{Namespace: op.Namespace, Name: op.Name})
	}
	if c.inputs.Bundles == nil {
		return keys, nil
	}
	bundles, err := c.inputs.Bundles.Bundles(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, b := range bundles {
		if o := bundleOwner(b); o != nil {
			keys = append(keys, o.key)
		}
	}
	return keys, nil
}
