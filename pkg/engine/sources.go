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

// Source names the object one copy is made from, and the row that wants
// it: push reads the source upstream by kind, namespace and name; a
// pulling agent (docs/design.md#pull-delivery) can only read it as the payload of one of its
// rows.
type Source struct {
	Kind, Namespace, Name string
	// Row is "<namespace>/<name>" of a downstreamcopies row whose copy is
	// made from this source.
	Row string
}

// SourceReader reads a source in full: a *corev1.Secret or
// *corev1.ConfigMap whose ResourceVersion is the source's upstream
// resourceVersion, or an error (NotFound when the source does not exist).
// The engine derives the copy from it with copyspec, which drops the
// courier.dev/ keys it finds, so an object that already is a copy (a
// payload) gives back the same copy.
type SourceReader interface {
	Read(ctx context.Context, src Source) (runtime.Object, error)
}

// UpstreamSources reads sources with a client of the upstream cluster (GET
// of listed Secrets and ConfigMaps only): how push reads them.
type UpstreamSources struct {
	Client kubernetes.Interface
	// Guard, when set, is asked about every object read before it is
	// handed on; its error is returned instead of the object (a source
	// that may never be exported: exportpolicy.Policy.Guard).
	Guard func(runtime.Object) error
}

var _ SourceReader = UpstreamSources{}

// Read implements SourceReader.
func (u UpstreamSources) Read(ctx context.Context, src Source) (runtime.Object, error) {
	var obj runtime.Object
	var err error
	if src.Kind == "Secret" {
		obj, err = u.Client.CoreV1().Secrets(src.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
	} else {
		obj, err = u.Client.CoreV1().ConfigMaps(src.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	if u.Guard != nil {
		if err := u.Guard(obj); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

// sourceKey names one upstream source object.
type sourceKey struct {
	kind, namespace, name string
}

// sourceCache holds the full objects of the sources Courier copies, and
// only those: it is filled by reads of listed sources, keyed by
// resourceVersion, and pruned to what is still listed. Courier never caches
// the data of Secrets it does not copy.
type sourceCache struct {
	reader SourceReader
	// reads makes the workers that miss the cache for one source at one
	// resourceVersion share one read: a change of a source listed for 1,000
	// Clusters reaches every worker at once.
	reads singleflight.Group

	mu      sync.Mutex
	objects map[sourceKey]runtime.Object
}

func newSourceCache(reader SourceReader) *sourceCache {
	return &sourceCache{reader: reader, objects: map[sourceKey]runtime.Object{}}
}

// get returns the source at resourceVersion rv, reading it (for the row
// rowKey) only when the cached copy is older (or absent).
func (s *sourceCache) get(ctx context.Context, k sourceKey, rv, rowKey string) (runtime.Object, error) {
	s.mu.Lock()
	cached, ok := s.objects[k]
	s.mu.Unlock()
	if ok {
		if m, err := metaOf(cached); err == nil && m.GetResourceVersion() == rv {
			return cached, nil
		}
	}
	v, err, _ := s.reads.Do(k.kind+"/"+k.namespace+"/"+k.name+"@"+rv, func() (any, error) {
		obj, err := s.reader.Read(ctx, Source{Kind: k.kind, Namespace: k.namespace, Name: k.name, Row: rowKey})
		if err != nil {
			return nil, err
		}
		if _, err := metaOf(obj); err != nil {
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
