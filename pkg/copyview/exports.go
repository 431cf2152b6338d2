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
// kubeconfig: such a row is Denied, labelled not delivered
// (courier.LabelDeliver), and handed to no engine, so a copy made before
// is a leftover the engine removes (or keeps, with keepResources). Every
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
	row.Status = rowstatus.New(courier.CopyPhaseDenied, fmt.Sprintf(
		"%s; nothing is written to cluster %s, and a copy Courier made there before is removed, also one written with keepResources", v.Message, row.Spec.Cluster))
}

// deniedSource is the Problem of a denied source: its message is the
// verdict's, and its Event's reason ReasonExportDenied.
type deniedSource struct{ message string }

func (d deniedSource) Error() string { return d.message }

func deniedProblem(message string) error { return deniedSource{message: message} }

// delivered returns the rows whose copies are delivered (the rows handed
// to the engine): all but the Denied ones. It returns rows itself when
// none is Denied.
func delivered(rows []*courier.DownstreamCopy) []*courier.DownstreamCopy {
	for i, r := range rows {
		if !courier.Delivered(r.Labels) {
			out := append([]*courier.DownstreamCopy{}, rows[:i]...)
			for _, r := range rows[i+1:] {
				if courier.Delivered(r.Labels) {
					out = append(out, r)
				}
			}
			return out
		}
	}
	return rows
}
