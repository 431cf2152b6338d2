package engine

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// sourceKey names one upstream source object.
type sourceKey struct {
	kind, namespace, name string
}

// sourceCache holds the full objects of the sources Courier copies, and
// only those: it is filled by GETs of listed sources, keyed by
// resourceVersion, and pruned to what is still listed. Courier never caches
// the data of Secrets it does not copy.
type sourceCache struct {
	client kubernetes.Interface
	// reads makes the workers that miss the cache for one source at one
	// resourceVersion share one GET: a change of a source listed for 1,000
	// Clusters reaches every worker at once.
	reads singleflight.Group

	mu      sync.Mutex
	objects map[sourceKey]runtime.Object
}

func newSourceCache(client kubernetes.Interface) *sourceCache {
	return &sourceCache{client: client, objects: map[sourceKey]runtime.Object{}}
}

// get returns the source at resourceVersion rv, reading it from the
// upstream cluster only when the cached copy is older (or absent).
func (s *sourceCache) get(ctx context.Context, k sourceKey, rv string) (runtime.Object, error) {
	s.mu.Lock()
	cached, ok := s.objects[k]
	s.mu.Unlock()
	if ok {
		if m, err := metaOf(cached); err == nil && m.GetResourceVersion() == rv {
			return cached, nil
		}
	}
	v, err, _ := s.reads.Do(k.kind+"/"+k.namespace+"/"+k.name+"@"+rv, func() (any, error) {
		var obj runtime.Object
		var err error
		switch k.kind {
		case "Secret":
			obj, err = s.client.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		default:
			obj, err = s.client.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.objects[k] = obj
		s.mu.Unlock()
		return obj, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(runtime.Object), nil
}

// forget drops the given sources from the cache: no copy needs them any
// more.
func (s *sourceCache) forget(keys ...sourceKey) {
	if len(keys) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.objects, k)
	}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o, nil
	case *corev1.ConfigMap:
		return o, nil
	}
	return nil, errUnsupported
}
