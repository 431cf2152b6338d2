package fieldcopy

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/fieldcopy/resources"
	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
)

// fieldManager names Courier's field-copy writes in managedFields.
const fieldManager = "courier-fieldcopy"

// syncWait is how soon a target is looked at again while a source watch it
// needs has not synced yet.
const syncWait = 500 * time.Millisecond

// retry says when to look at a target again without an event: after a
// fixed time (a watch is syncing), and/or with the queue's per-target
// exponential backoff (a write failed, a resource is not served yet), so
// that a lasting problem is not retried at a fixed pace forever.
type retry struct {
	after   time.Duration
	backoff bool
}

// outcome is where one rule of one target stands after a pass.
type outcome struct {
	rule    rules.Rule
	source  *courier.FieldCopySource
	literal bool
	phase   courier.FieldCopyPhase // empty while the rule's value is computed but not yet judged
	message string
	// write is true when the destination does not hold the wanted value.
	write bool
	// retract is true when the rule's source may not be used (exports.go):
	// what Courier wrote at the destination before is removed.
	retract bool
	// retracting is true when this pass removes such fields: the write
	// that does it decides what the row says (unretracted).
	retracting bool
}

func (o *outcome) fail(phase courier.FieldCopyPhase, format string, args ...any) {
	o.phase, o.message = phase, fmt.Sprintf(format, args...)
}

// reconcile brings one target in line with its rules and publishes its
// rows. The watch holds the target's metadata; its full content is read
// only when it has rules.
func (c *Controller) reconcile(ctx context.Context, key objectKey) (retry, error) {
	inf := c.targetInformer(key)
	if inf == nil {
		c.forget(key)
		return retry{}, nil
	}
	item, exists, err := inf.GetStore().GetByKey(storeKey(key.Namespace, key.Name))
	if err != nil {
		return retry{}, err
	}
	if !exists || !hasRules(item) {
		c.forget(key)
		return retry{}, nil
	}
	m, err := meta.Accessor(item)
	if err != nil {
		return retry{}, err
	}
	obj, err := c.readTarget(ctx, key, m.GetResourceVersion())
	switch {
	case apierrors.IsNotFound(err):
		// Deleted since the watch saw it; its delete event follows.
		c.forget(key)
		return retry{}, nil
	case err != nil:
		return retry{}, fmt.Errorf("reading %s: %s", key, writeError(err))
	}
	return c.sync(ctx, key, obj, true)
}

func storeKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// sync computes every rule of obj, writes the target once if any
// destination differs (and this replica leads), and publishes the rows.
// On a conflict it re-reads the target and tries once more when mayRetry.
func (c *Controller) sync(ctx context.Context, key objectKey, obj *unstructured.Unstructured, mayRetry bool) (retry, error) {
	parsed := rules.ParseAnnotations(obj.GetAnnotations())
	if len(parsed) == 0 {
		c.forget(key)
		return retry{}, nil
	}
	wanted := obj.DeepCopy()
	outcomes, sources, again := c.plan(ctx, key, obj, wanted, parsed)
	c.setUses(key, sources)

	changed := !sameValue(obj.Object, wanted.Object)
	logger := klog.FromContext(ctx).WithValues("target", klog.KRef(obj.GetNamespace(), obj.GetName()), "kind", obj.GetKind())
	switch {
	case !changed:
	case !c.isLeading():
		for _, o := range outcomes {
			if o.write {
				o.fail(courier.FieldCopyPhasePending, "the destination does not hold the source's value yet; the leader writes it")
			}
		}
		c.unretracted(key, outcomes, "the leader removes it")
	case c.wasDropped(key, obj, wanted):
		for _, o := range outcomes {
			if o.write {
				o.fail(courier.FieldCopyPhaseFailed, "%s", droppedMessage(o.rule))
			}
		}
	default:
		updated, err := c.cfg.Dynamic.Resource(key.GVR).Namespace(obj.GetNamespace()).Update(ctx, wanted, metav1.UpdateOptions{FieldManager: fieldManager})
		switch {
		case apierrors.IsConflict(err):
			writesTotal.WithLabelValues("conflict").Inc()
			if !mayRetry {
				return retry{}, fmt.Errorf("updating %s: %w", key, err)
			}
			logger.V(2).Info("Target changed while Courier wrote it; re-reading")
			fresh, gerr := c.cfg.Dynamic.Resource(key.GVR).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				c.forget(key)
				return retry{}, nil
			}
			if gerr != nil {
				return retry{}, fmt.Errorf("re-reading %s after a conflict: %s", key, writeError(gerr))
			}
			c.remember(c.targetContent, key, fresh)
			return c.sync(ctx, key, fresh, false)
		case err != nil:
			writesTotal.WithLabelValues("failed").Inc()
			msg := writeError(err)
			var dsts []string
			for _, o := range outcomes {
				if o.write {
					dsts = append(dsts, o.rule.Destination.String())
				}
			}
			// Logged at the default verbosity once, by publish, when the
			// rows turn Failed; retries are quieter.
			logger.V(2).Info("Writing field copies failed", "destinations", dsts, "err", msg)
			for _, o := range outcomes {
				if o.write {
					o.fail(courier.FieldCopyPhaseFailed, "writing the target failed: %s", msg)
				}
			}
			c.unretracted(key, outcomes, "removing it failed: "+msg)
			again.backoff = true
		default:
			writesTotal.WithLabelValues("written").Inc()
			// The watch will show this version next: no need to read it.
			c.remember(c.targetContent, key, updated)
			c.judgeWrite(ctx, key, updated, wanted, outcomes)
		}
	}
	c.publish(ctx, key, obj, outcomes)
	return again, nil
}

// plan computes every rule onto wanted (a copy of obj) and returns the
// outcomes, the sources read, and when to look again without an event.
func (c *Controller) plan(ctx context.Context, key objectKey, obj, wanted *unstructured.Unstructured, parsed []rules.Rule) ([]*outcome, []objectKey, retry) {
	var p planned
	for _, r := range parsed {
		o := &outcome{rule: r}
		p.outcomes = append(p.outcomes, o)
		if value, ok := c.ruleValue(ctx, &p, o, obj.GetNamespace()); ok {
			applyRule(o, wanted, value)
		}
		c.noteRetraction(key, o, obj, wanted)
	}
	// Judge each rule only once all are applied, so that the comparison
	// sees the final object.
	for _, o := range p.outcomes {
		if o.phase != "" {
			continue
		}
		before, _, _ := get(obj.Object, o.rule.Destination)
		after, _, _ := get(wanted.Object, o.rule.Destination)
		if sameValue(before, after) {
			o.phase, o.message = courier.FieldCopyPhaseApplied, appliedMessage(o)
		} else {
			o.write = true
		}
	}
	return p.outcomes, p.sources, p.again
}

// planned is what plan gathers over one target's rules.
type planned struct {
	outcomes []*outcome
	// sources are the sources the rules name, found or not, so that a
	// change to any of them brings the target back.
	sources []objectKey
	again   retry
}

// ruleValue is the value rule o.rule puts at its destination: its JSON
// literal, or the field it names in its source. When there is none, it
// says why in o and returns false.
func (c *Controller) ruleValue(ctx context.Context, p *planned, o *outcome, targetNS string) (any, bool) {
	r := o.rule
	if r.Err != nil {
		o.fail(courier.FieldCopyPhaseInvalid, "%s: %v", r.Origin, r.Err)
		return nil, false
	}
	if r.Value.Literal == nil {
		return c.sourceValue(ctx, p, o, targetNS)
	}
	o.literal = true
	var value any
	if err := utiljson.Unmarshal(r.Value.Literal, &value); err != nil {
		o.fail(courier.FieldCopyPhaseInvalid, "%s: the JSON literal does not decode: %v", r.Origin, err)
		return nil, false
	}
	return value, true
}

// sourceValue reads the field rule o.rule copies from its source. The
// source's resource must be served and its watch synced; the watch holds
// metadata only (whether the source exists, at which version) and the
// content is read only now that a rule names it.
func (c *Controller) sourceValue(ctx context.Context, p *planned, o *outcome, targetNS string) (any, bool) {
	r, s := o.rule, o.rule.Value.Source
	o.source = &courier.FieldCopySource{Resource: s.Resource, Namespace: s.Namespace, Name: s.Name, Path: s.Path.String()}
	res, err := c.cfg.Resolver.Resolve(s.Resource)
	if err != nil {
		// The resource may be a CRD not installed yet: look again.
		o.fail(courier.FieldCopyPhaseInvalid, "%s: %v", r.Origin, err)
		p.again.backoff = true
		return nil, false
	}
	ns, ok := c.sourceNamespace(o, targetNS, s, res)
	if !ok {
		return nil, false
	}
	o.source.Namespace = ns
	if c.refuseSecret(o, res.GVR, ns, s.Name) {
		return nil, false
	}
	sk := objectKey{GVR: res.GVR, Namespace: ns, Name: s.Name}
	p.sources = append(p.sources, sk)
	inf, synced := c.sourceInformer(res.GVR, ns)
	if !synced {
		o.fail(courier.FieldCopyPhasePending, "waiting for Courier's watch on %s to sync", res.GVR.Resource)
		p.again.after = syncWait
		return nil, false
	}
	rv, exists := watched(inf, ns, s.Name)
	if exists && c.deniedByMetadata(o, inf, res.GVK.Kind, ns, s.Name) {
		return nil, false
	}
	var src *unstructured.Unstructured
	if exists {
		src, err = c.readSource(ctx, sk, rv)
		if err == nil && c.deniedByContent(o, sk, src) {
			return nil, false
		}
	}
	switch {
	case !exists || apierrors.IsNotFound(err):
		c.forgetSource(sk)
		o.fail(courier.FieldCopyPhaseSourceMissing, "%s %s does not exist", s.Resource, storeKey(ns, s.Name))
		return nil, false
	case err != nil:
		o.fail(courier.FieldCopyPhasePending, "reading %s %s failed, retrying: %s", s.Resource, storeKey(ns, s.Name), writeError(err))
		p.again.backoff = true
		return nil, false
	}
	v, found, err := get(src.Object, s.Path)
	switch {
	case err != nil:
		o.fail(courier.FieldCopyPhaseSourceMissing, "path %s cannot be read in %s %s: %v", s.Path, s.Resource, storeKey(ns, s.Name), err)
		return nil, false
	case !found:
		o.fail(courier.FieldCopyPhaseSourceMissing, "path %s does not exist in %s %s", s.Path, s.Resource, storeKey(ns, s.Name))
		return nil, false
	}
	return v, true
}

// applyRule puts value at o.rule's destination in wanted: merged into
// what is there (mode merge) or in its place.
func applyRule(o *outcome, wanted *unstructured.Unstructured, value any) {
	r := o.rule
	if r.Mode == courier.FieldCopyModeMerge {
		cur, _, err := get(wanted.Object, r.Destination)
		if err != nil {
			o.fail(courier.FieldCopyPhaseInvalid, "destination %s cannot be merged into: %v", r.Destination, err)
			return
		}
		value = mergePatch(cur, value)
	}
	if err := set(wanted.Object, r.Destination, value); err != nil {
		o.fail(courier.FieldCopyPhaseInvalid, "destination %s cannot be written: %v", r.Destination, err)
	}
}

// sourceNamespace decides where the source lives, refusing sources outside
// the target's namespace unless --fieldcopy-cross-namespace is set: anyone
// who may annotate a target could otherwise read anything Courier can read.
func (c *Controller) sourceNamespace(o *outcome, targetNS string, s *rules.Source, res resources.Resolved) (string, bool) {
	if !res.Namespaced {
		if s.Namespace != "" {
			o.fail(courier.FieldCopyPhaseInvalid, "%s: %s is cluster-scoped; write INSTANCE as a bare name", o.rule.Origin, s.Resource)
			return "", false
		}
		if !c.cfg.CrossNamespace {
			o.fail(courier.FieldCopyPhaseRefused, "%s %s is cluster-scoped, outside the target's namespace; such sources need --fieldcopy-cross-namespace", s.Resource, s.Name)
			return "", false
		}
		return "", true
	}
	ns := s.Namespace
	if ns == "" {
		ns = targetNS
	}
	if ns == "" {
		o.fail(courier.FieldCopyPhaseInvalid, "%s: the target is cluster-scoped; write INSTANCE as namespace/name", o.rule.Origin)
		return "", false
	}
	if ns != targetNS && !c.cfg.CrossNamespace {
		o.fail(courier.FieldCopyPhaseRefused, "source %s %s/%s is not in the target's namespace %q; cross-namespace sources need --fieldcopy-cross-namespace", s.Resource, ns, s.Name, targetNS)
		return "", false
	}
	return ns, true
}

// judgeWrite marks the written rules Applied, or Failed when the object the
// API server returned does not hold what was written (a status field, a
// field the schema prunes or defaults): that write is then not repeated
// until the target or the wanted value changes.
func (c *Controller) judgeWrite(ctx context.Context, key objectKey, updated, wanted *unstructured.Unstructured, outcomes []*outcome) {
	kept := true
	for _, o := range outcomes {
		if !o.write {
			continue
		}
		want, _, _ := get(wanted.Object, o.rule.Destination)
		got, _, _ := get(updated.Object, o.rule.Destination)
		if sameValue(want, got) {
			o.phase, o.message = courier.FieldCopyPhaseApplied, appliedMessage(o)
			continue
		}
		kept = false
		o.fail(courier.FieldCopyPhaseFailed, "%s", droppedMessage(o.rule))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept {
		delete(c.dropped, key)
		klog.FromContext(ctx).V(2).Info("Wrote field copies", "target", klog.KRef(key.Namespace, key.Name), "kind", updated.GetKind())
		return
	}
	w := wanted.DeepCopy()
	w.SetResourceVersion("")
	c.dropped[key] = droppedWrite{resourceVersion: updated.GetResourceVersion(), wanted: w.Object}
}

// wasDropped reports whether this exact write was made before, to this
// exact version of the target, and the API server did not keep it.
func (c *Controller) wasDropped(key objectKey, obj, wanted *unstructured.Unstructured) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dropped[key]
	if !ok {
		return false
	}
	// The wanted object carries the target's resourceVersion; compare
	// without it.
	w := wanted.DeepCopy()
	w.SetResourceVersion("")
	return d.resourceVersion == obj.GetResourceVersion() && sameValue(d.wanted, w.Object)
}

func droppedMessage(r rules.Rule) string {
	return fmt.Sprintf("the API server did not keep the value written at %s (a status field, or a field its schema prunes or defaults); not retried until the target or the source changes", r.Destination)
}

func appliedMessage(o *outcome) string {
	if o.source == nil {
		return fmt.Sprintf("%s holds the JSON literal", o.rule.Destination)
	}
	verb := "holds"
	if o.rule.Mode == courier.FieldCopyModeMerge {
		verb = "has merged"
	}
	return fmt.Sprintf("%s %s %s of %s %s", o.rule.Destination, verb, o.source.Path, o.source.Resource, storeKey(o.source.Namespace, o.source.Name))
}

// writeError describes a failed write without quoting values: an Invalid
// error from the API server can echo the rejected value, so only its field
// paths are kept; Forbidden and similar errors name verbs and objects only.
func writeError(err error) string {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		return "the request failed (no answer from the API server)"
	}
	s := status.Status()
	switch s.Reason {
	case metav1.StatusReasonForbidden, metav1.StatusReasonNotFound, metav1.StatusReasonUnauthorized,
		metav1.StatusReasonTimeout, metav1.StatusReasonServerTimeout, metav1.StatusReasonTooManyRequests,
		metav1.StatusReasonServiceUnavailable:
		return s.Message
	case metav1.StatusReasonInvalid:
		var fields []string
		if s.Details != nil {
			for _, cause := range s.Details.Causes {
				fields = append(fields, cause.Field)
			}
		}
		return fmt.Sprintf("the API server rejected the object as invalid at %v", fields)
	case metav1.StatusReasonBadRequest:
		return badRequestMessage(s.Message)
	}
	return fmt.Sprintf("the API server answered %d %s", s.Code, s.Reason)
}

// badRequestMessage describes a 400 BadRequest answer without its text.
// The kube-apiserver builds that text from the request body: a body it
// cannot decode is quoted ("the object provided is unrecognized ...
// (<its first 30 bytes>)"), and the decoders' errors quote values (a
// number that overflows, a time that does not parse, a string given a
// ",string" field). The body is the target with the values written, which
// may come from a Secret whatever the target's kind: a row (or a log
// line) must never carry them (docs/design.md#field-copies). So the text is never shown, for
// no kind of target, and neither cut nor filtered (a filter would have to
// know every form a value can be quoted in). What is shown instead is
// Courier's own text for the causes it recognises in the server's: only
// fixed phrases are looked for and only Courier's text comes out, so a
// value in the answer cannot reach the row (at worst it makes Courier pick
// a wrong cause). Paths too deep to be real fields never get here:
// rules.MaxPathSegments makes their rules Invalid.
func badRequestMessage(serverText string) string {
	const prefix = "the API server answered 400 BadRequest"
	const hidden = " (its message is not shown: it can quote the values written)"
	for _, c := range []struct{ phrase, cause string }{
		{"exceeded max depth", "the object is nested deeper than the API server decodes"},
		{"cannot unmarshal", "a value written does not have the type the target's kind has at that field (an object where a string belongs, say)"},
		{"cannot be handled as a", "the API server could not decode the target as its kind"},
		{"the object provided is unrecognized", "the API server could not decode the target as its kind"},
	} {
		if strings.Contains(serverText, c.phrase) {
			return prefix + ": " + c.cause + hidden
		}
	}
	return prefix + hidden
}
