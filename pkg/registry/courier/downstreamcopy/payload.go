package downstreamcopy

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/memstore"
)

// Sources reads upstream sources in full, by GET.
type Sources interface {
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// AgentChecker tells whether a user is the courier-agent of a Cluster.
type AgentChecker interface {
	IsAgentOf(u user.Info, namespace, cluster string) bool
}

// PayloadREST serves downstreamcopies/<row>/payload (GET, docs/design.md#pull-delivery): the
// Secret or ConfigMap exactly as the row's Cluster's agent must write it
// downstream, made by copyspec from the source as it is upstream now -- the
// object, labels and annotations a push would write.
//
// Only the agent of the row's Cluster is served. Courier's authorizer
// already refuses everyone else; the storage checks again, so that a
// payload cannot leak through an authorizer chain wired another way.
// Nothing here logs, records or keeps a payload, and no error carries any
// of its data.
type PayloadREST struct {
	rows       *memstore.Store[*courier.DownstreamCopy]
	sources    Sources
	agents     AgentChecker
	upstreamID string
	// exports refuses a source that may never be exported
	// (exportpolicy.Policy.Guard); nil refuses none.
	exports func(runtime.Object) error
}

var (
	_ rest.Storage                  = &PayloadREST{}
	_ rest.Getter                   = &PayloadREST{}
	_ rest.GroupVersionKindProvider = &PayloadREST{}
	_ rest.TableConvertor           = &PayloadREST{}
)

// NewPayloadREST returns the payload subresource over the rows in store.
// upstreamID goes into the owner label and courier.dev/upstream annotation
// of every payload, as on every copy Courier writes. exports is asked
// about every source read (exportpolicy.Policy.Guard); nil asks nothing.
func NewPayloadREST(store *memstore.Store[*courier.DownstreamCopy], sources Sources, agents AgentChecker, upstreamID string,
	exports func(runtime.Object) error) *PayloadREST {
	return &PayloadREST{rows: store, sources: sources, agents: agents, upstreamID: upstreamID, exports: exports}
}

var payloadResource = courier.Resource("downstreamcopies")

// New implements rest.Storage. A payload is a core/v1 Secret or ConfigMap;
// discovery and OpenAPI name Secret (see GroupVersionKind).
func (r *PayloadREST) New() runtime.Object { return &corev1.Secret{} }

// Destroy implements rest.Storage.
func (r *PayloadREST) Destroy() {}

// GroupVersionKind implements rest.GroupVersionKindProvider: the
// subresource answers in core/v1, as pods/eviction answers in policy and
// deployments/scale in autoscaling. One subresource has one kind in
// discovery; it is Secret, and a ConfigMap row's payload is a v1 ConfigMap,
// which its kind field says.
func (r *PayloadREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return corev1.SchemeGroupVersion.WithKind("Secret")
}

// ConvertToTable implements rest.TableConvertor: name and age, never data.
func (r *PayloadREST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return rest.NewDefaultTableConvertor(payloadResource).ConvertToTable(ctx, obj, opts)
}

// Get implements rest.Getter.
func (r *PayloadREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	row, ok := r.rows.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(payloadResource, name)
	}
	u, _ := genericapirequest.UserFrom(ctx)
	if r.agents == nil || !r.agents.IsAgentOf(u, ns, row.Spec.Cluster) {
		return nil, apierrors.NewForbidden(payloadResource, name, fmt.Errorf(
			"the payload is served only to the agent of Cluster %s/%s", ns, row.Spec.Cluster))
	}
	if err := copyable(row); err != nil {
		return nil, err
	}
	owner := copyspec.Owner{
		UpstreamID: r.upstreamID,
		HelmOp:     copycontract.OwnerKey(ns, row.Spec),
		Cluster:    row.Spec.Cluster,
		Keep:       row.Spec.KeepResources,
	}
	src := row.Spec.Source
	switch src.Kind {
	case "Secret":
		s, err := r.sources.Secret(ctx, ns, src.Name)
		if err != nil {
			return nil, sourceError(row, err)
		}
		if err := r.guard(s); err != nil {
			return nil, err
		}
		return copyspec.Secret(s, row.Spec.Target.Namespace, owner), nil
	case "ConfigMap":
		cm, err := r.sources.ConfigMap(ctx, ns, src.Name)
		if err != nil {
			return nil, sourceError(row, err)
		}
		if err := r.guard(cm); err != nil {
			return nil, err
		}
		return copyspec.ConfigMap(cm, row.Spec.Target.Namespace, owner), nil
	}
	return nil, noPayload(http.StatusConflict, metav1.StatusReasonConflict, row, fmt.Sprintf("kind %q cannot be copied", src.Kind))
}

// copyable refuses rows that have nothing to write, deciding from the
// row's label and spec, never from its displayed phase (which the view
// composes partly from this agent's own last report): a row whose copy is
// not delivered (courier.LabelDeliver=false: a leftover copy no HelmOp
// wants any more, or a source that may never be exported) is 409; a spec
// no copy can be written for (copycontract.Invalid) is 409; a spec
// without a source resourceVersion names a source that does not exist,
// 404. Every other row describes a copy that should exist downstream,
// whatever the push engine or the agent last saw. Whatever the row says,
// the source read is checked again (ClientSources.Guard). The phase
// appears in the messages only, for the reader.
func copyable(row *courier.DownstreamCopy) error {
	if !courier.Delivered(row.Labels) && row.Status.Phase == courier.CopyPhaseDenied {
		// Denied is the view's alone (docs/design.md#export-safety), never
		// a report's: the source may not be exported, as Guard would say.
		return apierrors.NewForbidden(payloadResource, row.Name, fmt.Errorf(
			"its source may never be exported: %s", row.Status.Message))
	}
	if !courier.Delivered(row.Labels) {
		return noPayload(http.StatusConflict, metav1.StatusReasonConflict, row, fmt.Sprintf(
			"its copy is not delivered (%s=false, phase %s): %s", courier.LabelDeliver, row.Status.Phase, row.Status.Message))
	}
	if why := copycontract.Invalid(row.Spec); why != "" {
		return noPayload(http.StatusConflict, metav1.StatusReasonConflict, row, fmt.Sprintf(
			"its phase is %s: %s", courier.CopyPhaseInvalid, why))
	}
	if copycontract.SourceMissing(row.Spec) {
		return noPayload(http.StatusNotFound, metav1.StatusReasonNotFound, row, fmt.Sprintf(
			"its source %s %s/%s does not exist (phase %s)", row.Spec.Source.Kind, row.Namespace, row.Spec.Source.Name, courier.CopyPhaseSourceMissing))
	}
	return nil
}

// guard refuses a source that may never be exported, whatever its row
// says (a row computed before an annotation was added): 403, with the
// rule's message and never the data.
func (r *PayloadREST) guard(obj runtime.Object) error {
	if r.exports == nil {
		return nil
	}
	if err := r.exports(obj); err != nil {
		return apierrors.NewForbidden(payloadResource, "", err)
	}
	return nil
}

// sourceError turns a failed read of the source into the answer: 404 when
// the source is gone (the row will say SourceMissing shortly), 500
// otherwise. Errors of a GET hold the API server's message, never data.
func sourceError(row *courier.DownstreamCopy, err error) error {
	if apierrors.IsNotFound(err) {
		return noPayload(http.StatusNotFound, metav1.StatusReasonNotFound, row, fmt.Sprintf(
			"its source %s %s/%s does not exist", row.Spec.Source.Kind, row.Namespace, row.Spec.Source.Name))
	}
	return apierrors.NewInternalError(fmt.Errorf("reading %s %s/%s upstream: %w", row.Spec.Source.Kind, row.Namespace, row.Spec.Source.Name, err))
}

func noPayload(code int32, reason metav1.StatusReason, row *courier.DownstreamCopy, why string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Details: &metav1.StatusDetails{Group: payloadResource.Group, Kind: payloadResource.Resource, Name: row.Name},
		Message: fmt.Sprintf("%s %q has no payload: %s", payloadResource, row.Name, why),
	}}
}

// ClientSources reads sources with a client of the upstream cluster.
type ClientSources struct {
	Client typedcorev1.CoreV1Interface
}

var _ Sources = ClientSources{}

// Secret implements Sources.
func (s ClientSources) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return s.Client.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ConfigMap implements Sources.
func (s ClientSources) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return s.Client.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}
