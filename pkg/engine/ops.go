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

// ops implements kindOps for one type; the two instances below differ
// only in the functions they are given.
type ops[T object] struct {
	reader    func(ns string) typedClient[T]
	client    func(ns string) typedClient[T]
	fromCache func(ns, name string) (T, error)
	listCache func() ([]T, error)
	// unlabelledCache is downstream.Client.Unlabelled for T's kind.
	unlabelledCache func() ([]runtime.Object, bool)
	listLive        func(ctx context.Context, opts metav1.ListOptions) ([]T, error)
	isSynced        func() bool
	build           func(src T, ns string, o copyspec.Owner) T
	isUpToDate      func(cur, want T) bool
	dataEqual       func(cur, want T) bool
	mustRecreate    func(cur, want T) bool
	// selector is what the cluster's informers select: its own copies.
	selector string
}

func (o ops[T]) desired(src runtime.Object, ns string, owner copyspec.Owner) object {
	return o.build(src.(T), ns, owner)
}

func (o ops[T]) cached(ns, name string) (object, bool) {
	if !o.isSynced() {
		return nil, false
	}
	obj, err := o.fromCache(ns, name)
	if err != nil {
		return nil, false
	}
	return obj, true
}

func (o ops[T]) synced() bool { return o.isSynced() }

func (o ops[T]) get(ctx context.Context, ns, name string) (object, error) {
	return o.reader(ns).Get(ctx, name, metav1.GetOptions{})
}

func (o ops[T]) create(ctx context.Context, obj object) (string, error) {
	return resourceVersion(o.client(obj.GetNamespace()).Create(ctx, obj.(T), metav1.CreateOptions{FieldManager: "courier"}))
}

func (o ops[T]) update(ctx context.Context, obj object) (string, error) {
	return resourceVersion(o.client(obj.GetNamespace()).Update(ctx, obj.(T), metav1.UpdateOptions{FieldManager: "courier"}))
}

// resourceVersion is the written object's resourceVersion ("" when the
// write failed or the answer carried none).
func resourceVersion[T object](obj T, err error) (string, error) {
	if err != nil || any(obj) == nil || reflect.ValueOf(obj).IsNil() {
		return "", err
	}
	return obj.GetResourceVersion(), nil
}

func (o ops[T]) delete(ctx context.Context, ns, name string, opts *metav1.DeleteOptions) error {
	return o.client(ns).Delete(ctx, name, *opts)
}

// listManaged returns the copies written for this cluster's Cluster, in
// every namespace: from the label-filtered informer once synced, else with a
// live list by the same selector.
func (o ops[T]) listManaged(ctx context.Context) ([]object, error) {
	if o.isSynced() {
		items, err := o.listCache()
		return objects(items), err
	}
	items, err := o.listLive(ctx, metav1.ListOptions{LabelSelector: o.selector})
	return objects(items), err
}

func (o ops[T]) listUnlabelled(ctx context.Context) ([]object, error) {
	if cached, ok := o.unlabelledCache(); ok {
		out := make([]object, 0, len(cached))
		for _, obj := range cached {
			if t, ok := obj.(T); ok {
				out = append(out, t)
			}
		}
		return out, nil
	}
	items, err := o.listLive(ctx, metav1.ListOptions{LabelSelector: copyspec.UnlabelledSelector().String()})
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
	return ok && o.isUpToDate(c, want.(T))
}

func (o ops[T]) sameData(cur, want object) bool {
	c, ok := cur.(T)
	return ok && o.dataEqual(c, want.(T))
}

func (o ops[T]) needsRecreate(cur, want object) bool {
	c, ok := cur.(T)
	return ok && o.mustRecreate(c, want.(T))
}

// objectOps returns the operations for kind ("Secret" or "ConfigMap") in a
// downstream cluster: reads with Courier's own client, writes with writer
// (the ServiceAccount's impersonating client, or Courier's own).
func objectOps(c *downstream.Client, writer writeClient, kind string) kindOps {
	if kind == "Secret" {
		return ops[*corev1.Secret]{
			reader:          func(ns string) typedClient[*corev1.Secret] { return c.Kube.CoreV1().Secrets(ns) },
			client:          func(ns string) typedClient[*corev1.Secret] { return writer.CoreV1().Secrets(ns) },
			fromCache:       func(ns, name string) (*corev1.Secret, error) { return c.Secrets.Secrets(ns).Get(name) },
			listCache:       func() ([]*corev1.Secret, error) { return c.Secrets.List(labels.Everything()) },
			unlabelledCache: func() ([]runtime.Object, bool) { return c.Unlabelled("Secret") },
			listLive: func(ctx context.Context, opts metav1.ListOptions) ([]*corev1.Secret, error) {
				l, err := c.Kube.CoreV1().Secrets("").List(ctx, opts)
				if err != nil {
					return nil, err
				}
				return pointers(l.Items), nil
			},
			isSynced: c.HasSynced,
			build: func(src *corev1.Secret, ns string, o copyspec.Owner) *corev1.Secret {
				return copyspec.Secret(src, ns, o)
			},
			isUpToDate:   copyspec.SecretUpToDate,
			dataEqual:    copyspec.SecretDataEqual,
			mustRecreate: copyspec.SecretNeedsRecreate,
			selector:     c.Selector,
		}
	}
	return ops[*corev1.ConfigMap]{
		reader:          func(ns string) typedClient[*corev1.ConfigMap] { return c.Kube.CoreV1().ConfigMaps(ns) },
		client:          func(ns string) typedClient[*corev1.ConfigMap] { return writer.CoreV1().ConfigMaps(ns) },
		fromCache:       func(ns, name string) (*corev1.ConfigMap, error) { return c.ConfigMaps.ConfigMaps(ns).Get(name) },
		listCache:       func() ([]*corev1.ConfigMap, error) { return c.ConfigMaps.List(labels.Everything()) },
		unlabelledCache: func() ([]runtime.Object, bool) { return c.Unlabelled("ConfigMap") },
		listLive: func(ctx context.Context, opts metav1.ListOptions) ([]*corev1.ConfigMap, error) {
			l, err := c.Kube.CoreV1().ConfigMaps("").List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return pointers(l.Items), nil
		},
		isSynced: c.HasSynced,
		build: func(src *corev1.ConfigMap, ns string, o copyspec.Owner) *corev1.ConfigMap {
			return copyspec.ConfigMap(src, ns, o)
		},
		isUpToDate:   copyspec.ConfigMapUpToDate,
		dataEqual:    copyspec.ConfigMapDataEqual,
		mustRecreate: copyspec.ConfigMapNeedsRecreate,
		selector:     c.Selector,
	}
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
