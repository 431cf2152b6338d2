package copyview

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	clusterdelivery "github.com/courier-dev/courier/pkg/delivery"
	"github.com/courier-dev/courier/pkg/exportpolicy"
)

// Which HelmOps an event can affect, so that a change costs work in
// proportion to what it touches:
//
//   - a HelmOp: itself (deleted: its rows go);
//   - a Secret or ConfigMap: the HelmOps of its namespace that list it, at
//     the root or in any target (ListedIndex); one that no HelmOp lists
//     costs an index lookup;
//   - a Cluster or ClusterGroup: every HelmOp of its namespace, since
//     targets select Clusters by label and groups (a deleted Cluster's rows
//     go with it). Only what targeting reads counts as a change: a Cluster's
//     labels, a ClusterGroup's labels and selector, a HelmOp's spec, a
//     source's resourceVersion; resyncs and status updates queue nothing.

// ListedIndex is the name of the HelmOp index by listed resource: its
// values are ListedKey(namespace, kind, name) for every supported entry
// of the HelmOp's downstreamResources, at the root and in its targets.
const ListedIndex = "courier.dev/listed"

// ListedKey is the ListedIndex value of a resource: its namespace, kind in
// lower case and name.
func ListedKey(namespace, kind, name string) string {
	return namespace + "/" + strings.ToLower(kind) + "/" + name
}

// indexListed is the ListedIndex function, for HelmOps and Bundles.
func indexListed(obj any) ([]string, error) {
	var namespace string
	var root []fleet.DownstreamResource
	var targets []fleet.BundleTarget
	switch o := obj.(type) {
	case *fleet.HelmOp:
		namespace, root, targets = o.Namespace, o.Spec.DownstreamResources, o.Spec.Targets
	case *fleet.Bundle:
		if !IsBundleOwner(o) {
			return nil, nil
		}
		namespace, root, targets = o.Namespace, o.Spec.DownstreamResources, o.Spec.Targets
	default:
		return nil, nil
	}
	var keys []string
	seen := map[string]bool{}
	add := func(list []fleet.DownstreamResource) {
		for _, r := range list {
			kind, ok := copycontract.SupportedKind(r.Kind)
			if !ok || r.Name == "" {
				continue
			}
			if k := ListedKey(namespace, kind, r.Name); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	add(root)
	for i := range targets {
		add(targets[i].DownstreamResources)
	}
	return keys, nil
}

// bundleEvents queues a Bundle's key (namespace/bundle:<name>) when what
// the view reads of it changes: its spec, or the labels that say whether
// it owns rows and which GitRepo it came from. A Bundle made from a
// HelmOp is queued too when it changes, so that rows it had before it was
// labelled go; its sync finds it owns nothing.
func (c *Controller) bundleEvents() cache.ResourceEventHandler {
	queue := func(obj any) {
		if ns, name, ok := namespaceAndName(obj); ok && c.started.Load() {
			c.enqueue(types.NamespacedName{Namespace: ns, Name: courier.BundleSummaryPrefix + name})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if b, ok := obj.(*fleet.Bundle); !ok || IsBundleOwner(b) {
				queue(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*fleet.Bundle)
			n, _ := obj.(*fleet.Bundle)
			if o == nil || n == nil || !reflect.DeepEqual(o.Spec, n.Spec) ||
				o.Labels[fleet.LabelHelmOpName] != n.Labels[fleet.LabelHelmOpName] ||
				o.Labels[fleet.LabelRepoName] != n.Labels[fleet.LabelRepoName] {
				queue(obj)
			}
		},
		DeleteFunc: queue,
	}
}

func (c *Controller) helmOpEvents() cache.ResourceEventHandler {
	queue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil && c.started.Load() {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			c.enqueue(types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: queue,
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*fleet.HelmOp)
			n, _ := obj.(*fleet.HelmOp)
			if o == nil || n == nil || !reflect.DeepEqual(o.Spec, n.Spec) {
				queue(obj)
			}
		},
		DeleteFunc: queue,
	}
}

func (c *Controller) clusterEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.queueNamespaceOf(obj)
			c.queueKubeconfigListers(obj)
		},
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*fleet.Cluster)
			n, _ := obj.(*fleet.Cluster)
			// Labels decide targeting; the agent annotation who
			// delivers the Cluster (clusterdelivery.Of), and so where
			// its rows' status comes from.
			if o == nil || n == nil || clusterdelivery.Of(o) != clusterdelivery.Of(n) {
				c.forgetPulledOf(obj) // a new agent is waited for from now
				c.queueNamespaceOf(obj)
			} else if !labels.Equals(o.Labels, n.Labels) {
				c.queueNamespaceOf(obj)
			}
			// The Secret a Cluster names as its kubeconfig is never
			// exported: the HelmOps listing the one it named and the one
			// it names now are synced again, in whatever namespace.
			if o == nil || n == nil || o.Spec.KubeConfigSecret != n.Spec.KubeConfigSecret ||
				o.Spec.KubeConfigSecretNamespace != n.Spec.KubeConfigSecretNamespace {
				c.queueKubeconfigListers(old)
				c.queueKubeconfigListers(obj)
			}
		},
		DeleteFunc: func(obj any) {
			c.forgetPulledOf(obj)
			c.queueNamespaceOf(obj)
			c.queueKubeconfigListers(obj)
		},
	}
}

// forgetPulledOf forgets when a Cluster (an informer's object) was first
// seen pulled.
func (c *Controller) forgetPulledOf(obj any) {
	if ns, name, ok := namespaceAndName(obj); ok {
		c.forgetPulled(types.NamespacedName{Namespace: ns, Name: name})
	}
}

// queueKubeconfigListers queues the HelmOps that list the Secret a Cluster
// (or its tombstone) names as its kubeconfig.
func (c *Controller) queueKubeconfigListers(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if !c.started.Load() {
		return
	}
	refs, _ := exportpolicy.KubeconfigRefs(obj)
	for _, ref := range refs {
		ns, name, _ := strings.Cut(ref, "/")
		c.queueListers(ListedKey(ns, "Secret", name), false)
	}
}

func (c *Controller) clusterGroupEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: c.queueNamespaceOf,
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*fleet.ClusterGroup)
			n, _ := obj.(*fleet.ClusterGroup)
			if o == nil || n == nil || !labels.Equals(o.Labels, n.Labels) || !reflect.DeepEqual(o.Spec, n.Spec) {
				c.queueNamespaceOf(obj)
			}
		},
		DeleteFunc: c.queueNamespaceOf,
	}
}

// sourceEvents handles the metadata-only events of one source kind. A
// source that appears or goes changes its rows' phase: their HelmOps get a
// full sync. A new version of one that exists changes only the rows that
// name it (syncSources).
func (c *Controller) sourceEvents(kind string) cache.ResourceEventHandler {
	queue := func(obj any, changed bool) {
		if !c.started.Load() {
			return
		}
		ns, name, ok := namespaceAndName(obj)
		if !ok {
			return
		}
		c.queueListers(ListedKey(ns, kind, name), changed)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { queue(obj, false) },
		UpdateFunc: func(old, obj any) {
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(obj)
			switch {
			case err1 != nil || err2 != nil:
				queue(obj, false)
			case o.GetResourceVersion() != n.GetResourceVersion():
				queue(obj, true)
			}
		},
		DeleteFunc: func(obj any) {
			queue(obj, false)
			c.forgetSecretType(kind, obj)
		},
	}
}

// queueListers queues the HelmOps that list a source (ListedKey): for the
// rows that name it only when changed (a new version of a source that
// existed), else for a full sync.
func (c *Controller) queueListers(listed string, changed bool) {
	for _, key := range c.listers(listed) {
		if changed {
			c.enqueueSource(key, listed)
		} else {
			c.enqueue(key)
		}
	}
}

// listers are the keys of the owners that list a source (ListedKey).
func (c *Controller) listers(listed string) []types.NamespacedName {
	var keys []types.NamespacedName
	for _, idx := range []cache.Indexer{c.helmOps, c.bundles} {
		if idx == nil {
			continue
		}
		objs, err := idx.ByIndex(ListedIndex, listed)
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		for _, obj := range objs {
			switch o := obj.(type) {
			case *fleet.HelmOp:
				keys = append(keys, types.NamespacedName{Namespace: o.Namespace, Name: o.Name})
			case *fleet.Bundle:
				keys = append(keys, types.NamespacedName{Namespace: o.Namespace, Name: courier.BundleSummaryPrefix + o.Name})
			}
		}
	}
	return keys
}

// forgetSecretType drops the type known of a deleted Secret.
func (c *Controller) forgetSecretType(kind string, obj any) {
	if kind != "Secret" || c.inputs.SecretTypes == nil {
		return
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		c.inputs.SecretTypes.Forget(m.GetUID())
	}
}

// queueNamespaceOf queues every owner (HelmOp or Bundle) in obj's
// namespace.
func (c *Controller) queueNamespaceOf(obj any) {
	if !c.started.Load() {
		return
	}
	ns, _, ok := namespaceAndName(obj)
	if !ok {
		return
	}
	keys, err := c.ownerKeys(ns)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, key := range keys {
		c.enqueue(key)
	}
}

// namespaceAndName returns the namespace and name of an informer's object
// or tombstone.
func namespaceAndName(obj any) (namespace, name string, ok bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return "", "", false
	}
	namespace, name, err = cache.SplitMetaNamespaceKey(key)
	return namespace, name, err == nil
}
