package fieldcopy

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
)

// What Courier holds of the objects field copies touch:
//
//   - every object of a target or source kind (in the watched namespaces):
//     its metadata only, trimmed by trimMetadata to name, namespace, UID,
//     resourceVersion, the rule annotations and courier.dev/export;
//   - the full content of each source some rule names (sourceContent) and
//     of each target that has rules (targetContent), read by GET and used
//     while the watch shows the same resourceVersion. A source's content is
//     dropped as soon as no rule names it; a target's when it has no rules
//     any more or is gone.
//
// So an object no rule names is never read in full, whatever its kind.

// trimMetadata is the transform of Courier's own metadata watches: it keeps
// what field copies use and drops the rest (managedFields, labels, owner
// references, other annotations — kubectl's last-applied-configuration
// annotation holds a whole object, for a Secret its data).
func trimMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              m.Name,
			Namespace:         m.Namespace,
			UID:               m.UID,
			ResourceVersion:   m.ResourceVersion,
			DeletionTimestamp: m.DeletionTimestamp,
		},
	}
	for k, v := range m.Annotations {
		// The export annotation stays too: a source so annotated is never
		// read for a rule (exports.go).
		if rules.IsRuleAnnotation(k) || k == exportpolicy.AnnotationExport {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out, nil
}

// watched returns the resourceVersion a watch shows for an object, and
// whether the watch holds it at all.
func watched(inf cache.SharedIndexInformer, namespace, name string) (rv string, exists bool) {
	item, exists, err := inf.GetStore().GetByKey(storeKey(namespace, name))
	if err != nil || !exists {
		return "", false
	}
	m, err := meta.Accessor(item)
	if err != nil {
		return "", false
	}
	return m.GetResourceVersion(), true
}

// readSource returns the full source object at resourceVersion rv (what
// its watch shows): the copy read before if it is that version, else a
// GET, kept for next time. The result must not be modified.
func (c *Controller) readSource(ctx context.Context, key objectKey, rv string) (*unstructured.Unstructured, error) {
	return c.read(ctx, c.sourceContent, key, rv)
}

// readTarget is readSource for a target with rules.
func (c *Controller) readTarget(ctx context.Context, key objectKey, rv string) (*unstructured.Unstructured, error) {
	return c.read(ctx, c.targetContent, key, rv)
}

func (c *Controller) read(ctx context.Context, cached map[objectKey]*unstructured.Unstructured, key objectKey, rv string) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	obj, ok := cached[key]
	c.mu.Unlock()
	if ok && rv != "" && obj.GetResourceVersion() == rv {
		return obj, nil
	}
	obj, err := c.cfg.Dynamic.Resource(key.GVR).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	c.remember(cached, key, obj)
	return obj, nil
}

// remember keeps a full object just read or written. A GET may return a
// newer version than the watch shows yet; it is then read again until the
// watch catches up, which its event for that version does at once.
func (c *Controller) remember(cached map[objectKey]*unstructured.Unstructured, key objectKey, obj *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cached[key] = obj
}

// forgetSource drops what is held of a source's content (it is gone).
func (c *Controller) forgetSource(key objectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sourceContent, key)
}
