package exportpolicy

import (
	"sort"

	"k8s.io/client-go/tools/cache"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// kubeconfigIndex is the Cluster informer's index by kubeconfig Secret
// ("<namespace>/<name>", as KubeconfigKey).
const kubeconfigIndex = "courier.dev/kubeconfig-secret"

// KubeconfigKey is how a Secret is named in the kubeconfig index.
func KubeconfigKey(namespace, name string) string { return namespace + "/" + name }

// KubeconfigRefs returns the KubeconfigKey of the Secret a Cluster reads
// its kubeconfig from, or nil when it names none. It serves as the index
// function, and lets the view find the sources a Cluster event concerns.
func KubeconfigRefs(obj any) ([]string, error) {
	c, ok := obj.(*fleet.Cluster)
	if !ok {
		return nil, nil
	}
	ns, name := c.KubeconfigSecretRef()
	if name == "" {
		return nil, nil
	}
	return []string{KubeconfigKey(ns, name)}, nil
}

// InformerClusters is a ClusterIndex over the Fleet Cluster informer.
type InformerClusters struct {
	indexer cache.Indexer
}

var _ ClusterIndex = &InformerClusters{}

// NewInformerClusters adds the kubeconfig index to the Cluster informer
// (so call it before the informer starts) and returns the index. Every
// Cluster counts, in any namespace and whether or not Courier may read
// the Secret it names: a Secret named as a kubeconfig is a credential.
func NewInformerClusters(inf cache.SharedIndexInformer) (*InformerClusters, error) {
	if err := inf.AddIndexers(cache.Indexers{kubeconfigIndex: KubeconfigRefs}); err != nil {
		return nil, err
	}
	return &InformerClusters{indexer: inf.GetIndexer()}, nil
}

// NewIndexerClusters is NewInformerClusters over a bare indexer of Fleet
// Clusters (tests).
func NewIndexerClusters(indexer cache.Indexer) (*InformerClusters, error) {
	if err := indexer.AddIndexers(cache.Indexers{kubeconfigIndex: KubeconfigRefs}); err != nil {
		return nil, err
	}
	return &InformerClusters{indexer: indexer}, nil
}

// KubeconfigOf implements ClusterIndex.
func (c *InformerClusters) KubeconfigOf(namespace, name string) []string {
	objs, err := c.indexer.ByIndex(kubeconfigIndex, KubeconfigKey(namespace, name))
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objs {
		if cl, ok := o.(*fleet.Cluster); ok {
			out = append(out, cl.Namespace+"/"+cl.Name)
		}
	}
	sort.Strings(out)
	return out
}
