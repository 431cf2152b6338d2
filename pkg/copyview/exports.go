package copyview

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// The view alone decides that a source may not be exported
// (docs/design.md#export-safety), from its metadata, its type, whether
// its data holds a kubeconfig with credentials (read once per version,
// only the answer kept) and the Clusters that name it as their
// kubeconfig: such a row is Denied and labelled not delivered
// (courier.LabelDeliver). Its deliverer is handed it all the same: it
// writes nothing for it, removes a copy made before, even one written
// with keepResources, and looks for Fleet's own copy of the source, and
// the row shows what it found after the view's message. Every
// read of a source for copying applies the same rule again
// (exportpolicy.Policy.Guard), so a view that lags never lets one out.

// exportCheck gives each source's verdict once per computation: a source
// listed for 1,000 Clusters is checked once, not 1,000 times.
type exportCheck struct {
	ctx  context.Context
	in   Inputs
	seen map[string]exportpolicy.Verdict // by ListedKey
}

func newExportCheck(ctx context.Context, in Inputs) *exportCheck {
	return &exportCheck{ctx: ctx, in: in, seen: map[string]exportpolicy.Verdict{}}
}

// verdict returns the verdict for the source of kind whose metadata is m.
// It fails only when a Secret's type cannot be learnt: the HelmOp's sync
// then fails and is retried, changing nothing meanwhile (no copy is
// written, and none removed, on a guess).
func (x *exportCheck) verdict(kind string, m metav1.Object) (exportpolicy.Verdict, error) {
	key := ListedKey(m.GetNamespace(), kind, m.GetName())
	if v, ok := x.seen[key]; ok {
		return v, nil
	}
	v, err := sourceVerdict(x.ctx, x.in, kind, m)
	if err != nil {
		return exportpolicy.Verdict{}, err
	}
	x.seen[key] = v
	return v, nil
}

// sourceVerdict checks one source, looking up a Secret's type only when
// the deny list could deny it by type.
func sourceVerdict(ctx context.Context, in Inputs, kind string, m metav1.Object) (exportpolicy.Verdict, error) {
	src := exportpolicy.Source{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), Annotations: m.GetAnnotations(), Type: corev1.SecretTypeOpaque}
	if kind == "Secret" && in.Exports.DenyList() && in.SecretTypes != nil {
		// Decided without the type when it cannot matter: a kubeconfig or
		// an opted-out source is denied whatever its type.
		if v := in.Exports.Check(src); v.Denied() {
			return v, nil
		}
		t, err := in.SecretTypes.Type(ctx, m.GetNamespace(), m.GetName(), m.GetUID())
		if err != nil {
			return exportpolicy.Verdict{}, fmt.Errorf("telling whether Secret %s/%s may be exported: %w", m.GetNamespace(), m.GetName(), err)
		}
		src.Type = t
		if v := in.Exports.Check(src); v.Denied() {
			return v, nil
		}
		// The content rule needs the data: decided here, by the one owner
		// of a row's phase, once per version of the Secret.
		kc, err := in.SecretTypes.KubeconfigContent(ctx, m.GetNamespace(), m.GetName(), m.GetUID(), m.GetResourceVersion())
		if err != nil {
			return exportpolicy.Verdict{}, fmt.Errorf("telling whether Secret %s/%s may be exported: %w", m.GetNamespace(), m.GetName(), err)
		}
		src.KubeconfigContent = kc
	}
	return in.Exports.Check(src), nil
}

// denied returns the verdicts that deny, in the order of their messages.
func (x *exportCheck) denied() []exportpolicy.Verdict {
	var out []exportpolicy.Verdict
	for _, v := range x.seen {
		if v.Denied() {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Message < out[j].Message })
	return out
}

// deny makes row a Denied row: its copy is not delivered.
func deny(row *courier.DownstreamCopy, v exportpolicy.Verdict) {
	row.Labels[courier.LabelDeliver] = "false"
	row.Status = deniedStatus(row.Spec.Cluster, v)
}

// deniedStatus is the view's status of a Denied row for cluster.
func deniedStatus(cluster string, v exportpolicy.Verdict) courier.DownstreamCopyStatus {
	return rowstatus.New(courier.CopyPhaseDenied, fmt.Sprintf(
		"%s; nothing is written to cluster %s, and a copy Courier made there before is removed, also one written with keepResources", v.Message, cluster))
}

// restatedDenied returns a new row for the Denied row stored: its base
// status computed again from its source's verdict, for its deliverer's
// new note. ok is false when the source is gone, changed, or no longer
// denied: a full sync then computes the row.
func (c *Controller) restatedDenied(stored *courier.DownstreamCopy) (*courier.DownstreamCopy, bool) {
	kind, m, ok := c.source(ListedKey(stored.Namespace, stored.Spec.Source.Kind, stored.Spec.Source.Name))
	if !ok || m.GetResourceVersion() != stored.Spec.Source.ResourceVersion {
		return nil, false
	}
	v, err := sourceVerdict(context.Background(), c.inputs, kind, m)
	if err != nil || !v.Denied() {
		return nil, false
	}
	r := *stored // the spec is values; the metadata stays the store's, unchanged
	r.Status = deniedStatus(r.Spec.Cluster, v)
	return &r, true
}

// deniedSource is the Problem of a denied source: its message is the
// verdict's, and its Event's reason ReasonExportDenied.
type deniedSource struct{ message string }

func (d deniedSource) Error() string { return d.message }

func deniedProblem(message string) error { return deniedSource{message: message} }
