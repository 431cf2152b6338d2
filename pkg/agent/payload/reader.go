// Package payload reads, for the courier-agent, the objects its copies are
// made from: the payloads of its rows (downstreamcopies/<row>/payload,
// docs/design.md#pull-delivery), which Courier builds with copyspec exactly as push would
// write them. The agent never reads the upstream Secrets themselves.
package payload

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/engine"
)

// Reader GETs payloads through the courier.dev API of the upstream
// cluster. It implements engine.SourceReader: the engine caches what it
// returns by resourceVersion, so a payload is read once per source change.
//
// A payload's own resourceVersion is empty; the source's is in its
// courier.dev/source-resource-version annotation, which Reader moves to
// metadata.resourceVersion, where the engine looks for it. The engine then
// derives the copy from the payload with copyspec, which drops the
// courier.dev/ keys and adds its own: the same object again.
type Reader struct {
	client rest.Interface

	mu       sync.Mutex
	upstream string // courier.dev/upstream of the last payload read
}

var _ engine.SourceReader = (*Reader)(nil)

// NewReader returns a Reader over client, the REST client of the
// courier.dev/v1alpha1 API (CourierV1alpha1().RESTClient()).
func NewReader(client rest.Interface) *Reader {
	return &Reader{client: client}
}

// Read implements engine.SourceReader: the payload of src.Row, which must
// name src. Errors are the API's (404 when the source does not exist, 409
// when the row has nothing to write) and never carry a payload.
func (r *Reader) Read(ctx context.Context, src engine.Source) (runtime.Object, error) {
	ns, row, ok := strings.Cut(src.Row, "/")
	if !ok || ns != src.Namespace {
		return nil, fmt.Errorf("no row to read %s %s/%s through (row %q)", src.Kind, src.Namespace, src.Name, src.Row)
	}
	res := r.client.Get().Namespace(ns).Resource("downstreamcopies").Name(row).SubResource("payload").Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	raw, err := res.Raw()
	if err != nil {
		return nil, err
	}
	obj, err := decode(src, raw)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.upstream = obj.GetAnnotations()[copyspec.AnnotationUpstream]
	r.mu.Unlock()
	return obj, nil
}

// Upstream returns the courier.dev/upstream annotation of the last payload
// read, "" before the first: the id of the upstream cluster, which the
// agent needs for its copies' owner labels when --upstream-id is not set.
func (r *Reader) Upstream() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.upstream
}

// object is a Secret or a ConfigMap.
type object interface {
	runtime.Object
	GetAnnotations() map[string]string
	SetResourceVersion(string)
	GetName() string
}

// decode turns a payload into the Secret or ConfigMap src names, with the
// source's resourceVersion. Errors name the object, never its content.
func decode(src engine.Source, raw []byte) (object, error) {
	var obj object
	var kind string
	switch src.Kind {
	case "Secret":
		s := &corev1.Secret{}
		obj, kind = s, "Secret"
		if err := json.Unmarshal(raw, s); err != nil {
			return nil, fmt.Errorf("payload of row %s is not a Secret", src.Row)
		}
		if s.Kind != "" && s.Kind != kind {
			return nil, fmt.Errorf("payload of row %s is a %q, want Secret", src.Row, s.Kind)
		}
	case "ConfigMap":
		cm := &corev1.ConfigMap{}
		obj, kind = cm, "ConfigMap"
		if err := json.Unmarshal(raw, cm); err != nil {
			return nil, fmt.Errorf("payload of row %s is not a ConfigMap", src.Row)
		}
		if cm.Kind != "" && cm.Kind != kind {
			return nil, fmt.Errorf("payload of row %s is a %q, want ConfigMap", src.Row, cm.Kind)
		}
	default:
		return nil, fmt.Errorf("row %s: kind %q cannot be copied", src.Row, src.Kind)
	}
	if obj.GetName() != src.Name {
		return nil, fmt.Errorf("payload of row %s is %s %q, want %q", src.Row, kind, obj.GetName(), src.Name)
	}
	rv := obj.GetAnnotations()[copyspec.AnnotationSourceResourceVersion]
	if rv == "" {
		return nil, fmt.Errorf("payload of row %s has no %s annotation", src.Row, copyspec.AnnotationSourceResourceVersion)
	}
	obj.SetResourceVersion(rv)
	return obj, nil
}
