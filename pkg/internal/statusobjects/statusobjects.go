// Package statusobjects is what Courier's two kinds of upstream status
// ConfigMaps share: the Clusters' status objects (pkg/clusterstatus) and
// the agents' liveness digests (pkg/liveness). Both are read through an
// informer selected by their label, and both count their writes in one
// metric, so that the rate of status writes upstream is read off /metrics
// in one place (docs/scale-out.md).
package statusobjects

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// MaxDataBytes bounds the data of one status ConfigMap, below the 1 MiB
// a ConfigMap may hold: a report over it has its messages shortened, a
// digest its oldest records dropped.
const MaxDataBytes = 900 * 1024

// writesTotal counts this replica's upstream writes of Clusters' status
// objects and of pull delivery's liveness. Its only label is the kind of
// object: never a Cluster or row name.
var (
	writesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "agent_status_writes_total",
		Help:           "Upstream writes of Clusters' status objects and agents' liveness, by object: report (a pulled Cluster's report ConfigMap, on a status change), status (a pushed Cluster's status object, written by its deliverer on a status change), digest (this replica's liveness digests), digest_delete (an emptied or gone replica's digest).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"object"})

	registerOnce sync.Once
)

// RegisterMetrics adds the metric to the registry the API server serves
// on /metrics; it may be called more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(writesTotal)
	})
}

// CountWrite counts one upstream write of an object of the given kind
// (report, status, digest or digest_delete).
func CountWrite(object string) {
	writesTotal.WithLabelValues(object).Inc()
}

// Informer is an informer of the ConfigMaps in namespace that carry
// label=true, without their managed fields: Courier never caches other
// ConfigMaps in full.
func Informer(client kubernetes.Interface, namespace, label string, resync time.Duration) cache.SharedIndexInformer {
	inf := corev1informers.NewFilteredConfigMapInformer(client, namespace, resync, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.LabelSelector = label + "=true"
	})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	return inf
}
