package fieldcopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/rowname"
)

// RowName returns the name of the FieldCopy row of one rule on one target:
// <target-kind>.<target-name>.<destination-path> in lower case (docs/design.md#field-copies).
// Characters a name cannot hold become "-"; a name over 253 characters is
// cut and ends in a hash of the full name (never of a value), so it stays
// unique and every replica names a row the same way.
func RowName(kind, name, destination string) string {
	return rowname.For(kind, name, destination)
}

// uniqueName returns name, or name with a hash of the rule's origin when
// another row of the same target already has it (two destinations that
// differ only in characters a name cannot hold).
func uniqueName(name, origin string, taken map[string]bool) string {
	if !taken[name] {
		return name
	}
	sum := sha256.Sum256([]byte(origin))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	if len(name)+len(suffix) > validation.DNS1123SubdomainMaxLength {
		name = strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-")
	}
	return name + suffix
}

// publish turns a target's outcomes into rows, stamps their times, emits
// (when leading) Warning Events for rules that newly went wrong, and
// replaces the store's rows.
func (c *Controller) publish(ctx context.Context, key objectKey, obj *unstructured.Unstructured, outcomes []*outcome) {
	now := metav1.NewTime(c.now().Truncate(time.Second))
	rows := make([]*courier.FieldCopy, 0, len(outcomes))
	type warning struct{ reason, message string }
	var warnings []warning

	// publishMu keeps Replace calls in the order their snapshots were
	// taken: two workers must not store an older set of rows last.
	c.publishMu.Lock()
	defer c.publishMu.Unlock()
	c.mu.Lock()
	old := map[string]bool{}
	for _, r := range c.rows[key] {
		old[r.Name] = true
	}
	taken := map[string]bool{}
	for _, o := range outcomes {
		r := c.row(obj, o)
		r.Name = uniqueName(r.Name, o.rule.Origin, taken)
		taken[r.Name] = true
		rk := r.Namespace + "/" + r.Name
		delete(old, r.Name)
		s, seen := c.since[rk]
		if !seen || s.phase != r.Status.Phase {
			s = phaseSince{phase: r.Status.Phase, at: now}
			c.since[rk] = s
			switch r.Status.Phase {
			case courier.FieldCopyPhaseInvalid, courier.FieldCopyPhaseRefused, courier.FieldCopyPhaseFailed:
				warnings = append(warnings, warning{"FieldCopy" + string(r.Status.Phase), r.Status.Message})
				klog.FromContext(ctx).Info("Field copy cannot be applied", "target", klog.KRef(obj.GetNamespace(), obj.GetName()),
					"kind", obj.GetKind(), "destination", r.Spec.DestinationPath, "phase", r.Status.Phase, "message", r.Status.Message)
			}
		}
		if r.Status.Phase == courier.FieldCopyPhaseApplied {
			if _, ok := c.lastApplied[rk]; !ok || o.write {
				c.lastApplied[rk] = now
			}
		}
		if t, ok := c.lastApplied[rk]; ok {
			r.Status.LastAppliedTime = &t
		}
		r.Status.Conditions[0].LastTransitionTime = s.at
		rows = append(rows, r)
	}
	for name := range old {
		delete(c.since, key.Namespace+"/"+name)
		delete(c.lastApplied, key.Namespace+"/"+name)
	}
	// Replace compares every row of every target; skip it when this
	// target's rows are what they were, the usual case of an event that
	// changed nothing Courier shows.
	unchanged := apiequality.Semantic.DeepEqual(c.rows[key], rows)
	c.rows[key] = rows
	var all []*courier.FieldCopy
	if !unchanged {
		all = c.allRowsLocked()
	}
	// Every replica computes the rows; only the leader records Events, so
	// that with two replicas each appears once (a new leader's rows keep
	// their phases, and the previous leader recorded what went wrong).
	leading := c.leading
	c.mu.Unlock()

	if !unchanged {
		c.cfg.Store.Replace(all)
	}
	if c.cfg.Recorder != nil && leading {
		for _, w := range warnings {
			c.cfg.Recorder.Event(obj, corev1.EventTypeWarning, w.reason, w.message)
		}
	}
}

// row builds the FieldCopy of one outcome. It carries paths and object
// names only, never the value.
func (c *Controller) row(obj *unstructured.Unstructured, o *outcome) *courier.FieldCopy {
	dst := o.rule.DestinationName()
	ready := metav1.ConditionFalse
	if o.phase == courier.FieldCopyPhaseApplied {
		ready = metav1.ConditionTrue
	}
	r := &courier.FieldCopy{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: obj.GetNamespace(),
			Name:      RowName(obj.GetKind(), obj.GetName(), dst),
		},
		Spec: courier.FieldCopySpec{
			Target: courier.FieldCopyTarget{
				APIVersion: obj.GetAPIVersion(),
				Kind:       obj.GetKind(),
				Name:       obj.GetName(),
			},
			DestinationPath: dst,
			Literal:         o.literal,
			Mode:            o.rule.Mode,
		},
		Status: courier.FieldCopyStatus{
			Phase:   o.phase,
			Message: o.message,
			Conditions: []metav1.Condition{{
				Type:    courier.ConditionReady,
				Status:  ready,
				Reason:  string(o.phase),
				Message: o.message,
			}},
		},
	}
	if o.source != nil {
		s := *o.source
		r.Spec.Source = &s
	} else if src := o.rule.Value.Source; src != nil {
		r.Spec.Source = &courier.FieldCopySource{Resource: src.Resource, Namespace: src.Namespace, Name: src.Name, Path: src.Path.String()}
	}
	return r
}

func (c *Controller) allRowsLocked() []*courier.FieldCopy {
	var all []*courier.FieldCopy
	for _, rs := range c.rows {
		all = append(all, rs...)
	}
	return all
}

// forget drops a target that is gone or has no rules any more: its rows,
// its place in the source index, and what was remembered of its writes.
func (c *Controller) forget(key objectKey) {
	c.publishMu.Lock()
	defer c.publishMu.Unlock()
	c.mu.Lock()
	for _, r := range c.rows[key] {
		delete(c.since, r.Namespace+"/"+r.Name)
		delete(c.lastApplied, r.Namespace+"/"+r.Name)
	}
	_, had := c.rows[key]
	delete(c.rows, key)
	delete(c.dropped, key)
	delete(c.retracted, key)
	delete(c.targetContent, key)
	c.setUsesLocked(key, nil)
	var all []*courier.FieldCopy
	if had {
		all = c.allRowsLocked()
	}
	c.mu.Unlock()
	if had {
		c.cfg.Store.Replace(all)
	}
}

// setUses records which sources a target reads, so that an event on a
// source enqueues exactly the targets that read it.
func (c *Controller) setUses(key objectKey, sources []objectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setUsesLocked(key, sources)
}

// A source no rule names any more has its content dropped.
func (c *Controller) setUsesLocked(key objectKey, sources []objectKey) {
	for _, s := range sources {
		if c.index[s] == nil {
			c.index[s] = map[objectKey]bool{}
		}
		c.index[s][key] = true
	}
	still := make(map[objectKey]bool, len(sources))
	for _, s := range sources {
		still[s] = true
	}
	for _, s := range c.uses[key] {
		if still[s] {
			continue
		}
		delete(c.index[s], key)
		if len(c.index[s]) == 0 {
			delete(c.index, s)
			delete(c.sourceContent, s)
		}
	}
	if len(sources) == 0 {
		delete(c.uses, key)
		return
	}
	c.uses[key] = sources
}
