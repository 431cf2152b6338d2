package downstream

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// MetadataWriter writes an object and reads back only what the server made
// of its metadata. The engine needs nothing else from a write's answer but
// the resourceVersion (which its own watch will see again), while a typed
// client reads and decodes the whole object: for a copy that is the data
// Courier has just sent, once more per write. At 1,000 Clusters, reading
// and decoding those answers was about 40 % of what client-go's PUT path
// allocated in Courier (allocation profiles, docs/benchmarks.md, session
// 10), and the kube-apiserver encoded each one in full.
//
// The clientsets NewClientset builds are MetadataWriters; client-go's fake
// clientsets are not, and the engine then writes with the typed client.
type MetadataWriter interface {
	// CreateMetadata creates obj (a Secret or a ConfigMap) and returns the
	// created object's metadata.
	CreateMetadata(ctx context.Context, obj runtime.Object, opts metav1.CreateOptions) (metav1.Object, error)
	// UpdateMetadata replaces obj and returns the updated object's metadata.
	UpdateMetadata(ctx context.Context, obj runtime.Object, opts metav1.UpdateOptions) (metav1.Object, error)
}

var _ MetadataWriter = groupClients{}

// metadataAccept asks for the answer as PartialObjectMetadata (protobuf,
// else JSON), and then for the object itself: a server that cannot
// transform answers in full, and an error (a Status, which is never
// transformed) still comes back as itself rather than as 406 Not
// Acceptable.
const metadataAccept = runtime.ContentTypeProtobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	runtime.ContentTypeJSON + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON

// answers decodes a write's answer: PartialObjectMetadata, or a whole
// Secret or ConfigMap from a server that did not transform it.
var answers = func() runtime.Decoder {
	s := runtime.NewScheme()
	metav1.AddMetaToScheme(s)
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

func (g groupClients) CreateMetadata(ctx context.Context, obj runtime.Object, opts metav1.CreateOptions) (metav1.Object, error) {
	return g.writeMetadata(ctx, obj, false, &opts)
}

func (g groupClients) UpdateMetadata(ctx context.Context, obj runtime.Object, opts metav1.UpdateOptions) (metav1.Object, error) {
	return g.writeMetadata(ctx, obj, true, &opts)
}

func (g groupClients) writeMetadata(ctx context.Context, obj runtime.Object, update bool, opts runtime.Object) (metav1.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	var resource string
	switch obj.(type) {
	case *corev1.Secret:
		resource = "secrets"
	case *corev1.ConfigMap:
		resource = "configmaps"
	default:
		return nil, fmt.Errorf("downstream: cannot write a %T", obj)
	}
	var req *rest.Request
	if rc := g.core.RESTClient(); update {
		req = rc.Put().Name(m.GetName())
	} else {
		req = rc.Post()
	}
	raw, err := req.Namespace(m.GetNamespace()).Resource(resource).
		VersionedParams(opts, scheme.ParameterCodec).
		SetHeader("Accept", metadataAccept).
		Body(obj).
		Do(ctx).
		Raw()
	if err != nil {
		return nil, err
	}
	got, _, err := answers.Decode(raw, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the answer to writing %s %s/%s: %w", resource, m.GetNamespace(), m.GetName(), err)
	}
	return meta.Accessor(got)
}
