package engine

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
)

// object is a Secret or a ConfigMap.
type object interface {
	metav1.Object
	runtime.Object
}

// kindOps is what the engine does with one kind in one downstream cluster.
type kindOps interface {
	desired(src runtime.Object, ns string, o copyspec.Owner) object
	cached(ns, name string) (object, bool)
	get(ctx context.Context, ns, name string) (object, error)
	// create and update return the resourceVersion the server gave the
	// copy, which the engine's own watch will see again.
	create(ctx context.Context, obj object) (string, error)
	update(ctx context.Context, obj object) (string, error)
	delete(ctx context.Context, ns, name string, opts *metav1.DeleteOptions) error
	listManaged(ctx context.Context) ([]object, error)
	// listUnlabelled lists Courier's copies that carry no cluster-hash
	// label (written before it existed): from the client's watch of them
	// once synced, else live.
	listUnlabelled(ctx context.Context) ([]object, error)
	// synced reports whether the cluster's informers have synced: then
	// cached holds every copy written for this Cluster.
	synced() bool
	upToDate(cur, want object) bool
	// sameData reports whether cur has want's type and data (Fleet's own
	// copies are judged by that alone).
	sameData(cur, want object) bool
	needsRecreate(cur, want object) bool
}

// typedClient is the part of client-go's typed Secret and ConfigMap clients
// the engine uses.
type typedClient[T object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// ops implements kindOps for one type in one cluster: the client and
// the writer, and the type's functions (secretFuncs, configMapFuncs).
// Building one costs a single small allocation, as the engine builds one
// for every copy of every pass.
type ops[T object] struct {
	c      *downstream.Client
	writer writeClient
	fn     *kindFuncs[T]
}

// kindFuncs are what differs between Secrets and ConfigMaps; the two
// instances below are built once.
type kindFuncs[T object] struct {
	kind         string // "Secret" or "ConfigMap", as in Client.Unlabelled
	typed        func(cs writeClient, ns string) typedClient[T]
	fromCache    func(c *downstream.Client, ns, name string) (T, error)
	listCache    func(c *downstream.Client) ([]T, error)
	listLive     func(ctx context.Context, c *downstream.Client, opts metav1.ListOptions) ([]T, error)
	build        func(src T, ns string, o copyspec.Owner) T
	isUpToDate   func(cur, want T) bool
	dataEqual    func(cur, want T) bool
	mustRecreate func(cur, want T) bool
}

var secretFuncs = &kindFuncs[*corev1.Secret]{
	kind:  "Secret",
	typed: func(cs writeClient, ns string) typedClient[*corev1.Secret] { return cs.CoreV1().Secrets(ns) },
	fromCache: func(c *downstream.Client, ns, name string) (*corev1.Secret, error) {
		return c.Secrets.Secrets(ns).Get(name)
	},
	listCache: func(c *downstream.Client) ([]*corev1.Secret, error) { return c.Secrets.List(labels.Everything()) },
	listLive: func(ctx context.Context, c *downstream.Client, opts metav1.ListOptions) ([]*corev1.Secret, error) {
		l, err := c.Kube.CoreV1().Secrets("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return pointers(l.Items), nil
	},
	build:        copyspec.Secret,
	isUpToDate:   copyspec.SecretUpToDate,
	dataEqual:    copyspec.SecretDataEqual,
	mustRecreate: copyspec.SecretNeedsRecreate,
}

var configMapFuncs = &kindFuncs[*corev1.ConfigMap]{
	kind:  "ConfigMap",
	typed: func(cs writeClient, ns string) typedClient[*corev1.ConfigMap] { return cs.CoreV1().ConfigMaps(ns) },
	fromCache: func(c *downstream.Client, ns, name string) (*corev1.ConfigMap, error) {
		return c.ConfigMaps.ConfigMaps(ns).Get(name)
	},
	listCache: func(c *downstream.Client) ([]*corev1.ConfigMap, error) { return c.ConfigMaps.List(labels.Everything()) },
	listLive: func(ctx context.Context, c *downstream.Client, opts metav1.ListOptions) ([]*corev1.ConfigMap, error) {
		l, err := c.Kube.CoreV1().ConfigMaps("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return pointers(l.Items), nil
	},
	build:        copyspec.ConfigMap,
	isUpToDate:   copyspec.ConfigMapUpToDate,
	dataEqual:    copyspec.ConfigMapDataEqual,
	mustRecreate: copyspec.ConfigMapNeedsRecreate,
}

func (o ops[T]) desired(src runtime.Object, ns string, owner copyspec.Owner) object {
	return o.fn.build(src.(T), ns, owner)
}

func (o ops[T]) cached(ns, name string) (object, bool) {
	if !o.c.HasSynced() {
		return nil, false
	}
	obj, err := o.fn.fromCache(o.c, ns, name)
	if err != nil {
		return nil, false
	}
	return obj, true
}

func (o ops[T]) synced() bool { return o.c.HasSynced() }

func (o ops[T]) get(ctx context.Context, ns, name string) (object, error) {
	return o.fn.typed(o.c.Kube, ns).Get(ctx, name, metav1.GetOptions{})
}

// create and update read back only the written object's metadata when the
// writer can (downstream.MetadataWriter): the engine needs just its
// resourceVersion.
func (o ops[T]) create(ctx context.Context, obj object) (string, error) {
	ctx, end, err := admitWrite(ctx)
	if err != nil {
		return "", err
	}
	defer end()
	opts := metav1.CreateOptions{FieldManager: "courier"}
	if w, ok := o.writer.(downstream.MetadataWriter); ok {
		return resourceVersion(w.CreateMetadata(ctx, obj, opts))
	}
	return resourceVersion(o.fn.typed(o.writer, obj.GetNamespace()).Create(ctx, obj.(T), opts))
}

func (o ops[T]) update(ctx context.Context, obj object) (string, error) {
	ctx, end, err := admitWrite(ctx)
	if err != nil {
		return "", err
	}
	defer end()
	opts := metav1.UpdateOptions{FieldManager: "courier"}
	if w, ok := o.writer.(downstream.MetadataWriter); ok {
		return resourceVersion(w.UpdateMetadata(ctx, obj, opts))
	}
	return resourceVersion(o.fn.typed(o.writer, obj.GetNamespace()).Update(ctx, obj.(T), opts))
}

// resourceVersion is the written object's resourceVersion ("" when the
// write failed or the answer carried none).
func resourceVersion(obj metav1.Object, err error) (string, error) {
	if err != nil || obj == nil || reflect.ValueOf(obj).IsNil() {
		return "", err
	}
	return obj.GetResourceVersion(), nil
}

func (o ops[T]) delete(ctx context.Context, ns, name string, opts *metav1.DeleteOptions) error {
	ctx, end, err := admitWrite(ctx)
	if err != nil {
		return err
	}
	defer end()
	return o.fn.typed(o.writer, ns).Delete(ctx, name, *opts)
}

// listManaged returns the copies written for this cluster's Cluster, in
// every namespace: from the label-filtered informer once synced, else with a
// live list by the same selector.
func (o ops[T]) listManaged(ctx context.Context) ([]object, error) {
	if o.c.HasSynced() {
		items, err := o.fn.listCache(o.c)
		return objects(items), err
	}
	items, err := o.fn.listLive(ctx, o.c, metav1.ListOptions{LabelSelector: o.c.Selector})
	return objects(items), err
}

func (o ops[T]) listUnlabelled(ctx context.Context) ([]object, error) {
	if cached, ok := o.c.Unlabelled(o.fn.kind); ok {
		out := make([]object, 0, len(cached))
		for _, obj := range cached {
			if t, ok := obj.(T); ok {
				out = append(out, t)
			}
		}
		return out, nil
	}
	items, err := o.fn.listLive(ctx, o.c, metav1.ListOptions{LabelSelector: copyspec.UnlabelledSelector().String()})
	return objects(items), err
}

func objects[T object](items []T) []object {
	out := make([]object, 0, len(items))
	for _, it := range items {
		out = append(out, it)
	}
	return out
}

func (o ops[T]) upToDate(cur, want object) bool {
	c, ok := cur.(T)
	return ok && o.fn.isUpToDate(c, want.(T))
}

func (o ops[T]) sameData(cur, want object) bool {
	c, ok := cur.(T)
	return ok && o.fn.dataEqual(c, want.(T))
}

func (o ops[T]) needsRecreate(cur, want object) bool {
	c, ok := cur.(T)
	return ok && o.fn.mustRecreate(c, want.(T))
}

// objectOps returns the operations for kind ("Secret" or "ConfigMap") in a
// downstream cluster: reads with Courier's own client, writes with writer
// (the ServiceAccount's impersonating client, or Courier's own).
func objectOps(c *downstream.Client, writer writeClient, kind string) kindOps {
	if kind == "Secret" {
		return ops[*corev1.Secret]{c: c, writer: writer, fn: secretFuncs}
	}
	return ops[*corev1.ConfigMap]{c: c, writer: writer, fn: configMapFuncs}
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
