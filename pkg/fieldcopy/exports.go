package fieldcopy

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
)

// Export safety for field copies (docs/design.md#export-safety). Courier
// reads a rule's source with its own identity, and cannot see who wrote
// the rule, so a source exportpolicy denies is never used for a rule:
//
//   - a Secret source at all, unless --fieldcopy-secret-sources is set
//     (safe only with the admission policy that checks the rule's author
//     may get the source);
//   - what the source's metadata already denies (a Cluster's kubeconfig,
//     courier.dev/export: "false"), before anything is read;
//   - what the object read denies (its Secret type, a kubeconfig in its
//     data), by exportpolicy.Policy.GuardUnstructured; the object is then
//     dropped at once.
//
// The rule's row is Refused naming the rule, and whatever Courier wrote at
// the rule's destination before (the fields its field manager owns there)
// is removed from the target in the same update.

// coreSecrets is core/v1 Secrets.
var coreSecrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// secretSourcesOff is the message of a rule whose source is a Secret while
// --fieldcopy-secret-sources is not set.
const secretSourcesOff = "Secret sources are off; see --fieldcopy-secret-sources"

// refuseSecret refuses a Secret source when Secret sources are off.
func (c *Controller) refuseSecret(o *outcome, gvr schema.GroupVersionResource, ns, name string) bool {
	if gvr != coreSecrets || c.cfg.SecretSources {
		return false
	}
	o.refuse(fmt.Sprintf("source Secret %s is not read: %s", storeKey(ns, name), secretSourcesOff))
	return true
}

// deniedByMetadata applies the export rule to what the source's watch
// holds (its name and its courier.dev/export annotation), before any read.
func (c *Controller) deniedByMetadata(o *outcome, inf cache.SharedIndexInformer, kind string, ns, name string) bool {
	item, exists, err := inf.GetStore().GetByKey(storeKey(ns, name))
	if err != nil || !exists {
		return false
	}
	m, err := meta.Accessor(item)
	if err != nil {
		return false
	}
	v := c.cfg.Exports.Check(exportpolicy.Source{Kind: kind, Namespace: ns, Name: name, Annotations: m.GetAnnotations()})
	if !v.Denied() {
		return false
	}
	o.refuse(v.Message)
	return true
}

// deniedByContent applies the export rule to the source just read; a
// denied source is forgotten at once.
func (c *Controller) deniedByContent(o *outcome, sk objectKey, src *unstructured.Unstructured) bool {
	err := c.cfg.Exports.GuardUnstructured(src)
	v, denied := exportpolicy.IsDenied(err)
	if !denied {
		return false
	}
	c.forgetSource(sk)
	o.refuse(v.Message)
	return true
}

// refuse makes o Refused for a source that may not be used, and marks its
// destination for retraction.
func (o *outcome) refuse(message string) {
	o.fail(courier.FieldCopyPhaseRefused, "%s; nothing is copied from it", message)
	o.retract = true
}

// noteRetraction retracts what a refused rule wrote (retract), and says so
// on its row for as long as the rule stays refused: the pass after the
// write that emptied the destination finds nothing left to remove.
func (c *Controller) noteRetraction(key objectKey, o *outcome, obj, wanted *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := c.retracted[key]
	if !o.retract {
		delete(done, o.rule.Origin)
		return
	}
	o.retracting = retract(o, obj, wanted)
	if o.retracting || done[o.rule.Origin] {
		if done == nil {
			done = map[string]bool{}
			c.retracted[key] = done
		}
		done[o.rule.Origin] = true
		o.message += retractedSuffix(o)
	}
}

// unretracted corrects the rows of rules whose retraction this pass did
// not write (a follower, or a failed write): what Courier wrote is still
// there, and why says what happens to it.
func (c *Controller) unretracted(key objectKey, outcomes []*outcome, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range outcomes {
		if !o.retracting {
			continue
		}
		delete(c.retracted[key], o.rule.Origin)
		o.message = strings.TrimSuffix(o.message, retractedSuffix(o)) +
			fmt.Sprintf("; what Courier wrote at %s before is still in the target: %s", o.rule.Destination, why)
	}
}

func retractedSuffix(o *outcome) string {
	return fmt.Sprintf("; what Courier wrote at %s before is removed from the target", o.rule.Destination)
}

// retract removes from wanted what Courier's field manager wrote at o's
// destination in obj, and reports whether there was any. A replace
// rule's destination goes whole; a merge rule loses only the fields
// Courier wrote under it.
func retract(o *outcome, obj, wanted *unstructured.Unstructured) bool {
	owned := ownedUnder(obj.GetManagedFields(), o.rule.Destination)
	if len(owned) == 0 {
		return false
	}
	if o.rule.Mode != courier.FieldCopyModeMerge {
		owned = [][]string{o.rule.Destination}
	}
	for _, p := range owned {
		unstructured.RemoveNestedField(wanted.Object, p...)
	}
	return true
}

// ownedUnder returns the paths at or under dst of the fields Courier's
// field manager owns in an object, from its managedFields: the leaves, or
// a field whole where it holds a list.
func ownedUnder(entries []metav1.ManagedFieldsEntry, dst rules.Path) [][]string {
	var out [][]string
	for _, e := range entries {
		if e.Manager != fieldManager || e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &node); err != nil {
			continue
		}
		for _, seg := range dst {
			next, ok := node["f:"+seg].(map[string]any)
			if !ok {
				node = nil
				break
			}
			node = next
		}
		if node != nil {
			out = append(out, leaves(node, append([]string(nil), dst...))...)
		}
	}
	return out
}

// leaves lists the owned fields of a fieldsV1 node at path.
func leaves(node map[string]any, path []string) [][]string {
	var out [][]string
	for k, v := range node {
		if k == "." {
			continue
		}
		child, ok := v.(map[string]any)
		name, field := strings.CutPrefix(k, "f:")
		if !field || !ok {
			return [][]string{path} // a list or set: the field whole
		}
		out = append(out, leaves(child, append(append([]string(nil), path...), name))...)
	}
	if len(out) == 0 {
		return [][]string{path}
	}
	return out
}
