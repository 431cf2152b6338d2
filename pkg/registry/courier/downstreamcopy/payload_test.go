package downstreamcopy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/memstore"
)

const (
	upstream = "upstream-uid"
	// secretValue must never appear in an error, whatever the error.
	secretValue = "hunter2-do-not-leak"
)

// fakeSources holds upstream sources by "kind/namespace/name"; err, when
// set, is what every read returns.
type fakeSources struct {
	objects map[string]any
	err     error
}

func (f fakeSources) get(kind, ns, name string) (any, error) {
	if f.err != nil {
		return nil, f.err
	}
	o, ok := f.objects[kind+"/"+ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, name)
	}
	return o, nil
}

func (f fakeSources) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	o, err := f.get("Secret", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Secret).DeepCopy(), nil
}

func (f fakeSources) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	o, err := f.get("ConfigMap", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.ConfigMap).DeepCopy(), nil
}

// fakeAgents: agent-edge1 is the agent of fleet-default/edge1, no one else
// is an agent.
type fakeAgents struct{}

func (fakeAgents) IsAgentOf(u user.Info, ns, cluster string) bool {
	return u != nil && u.GetName() == "agent-edge1" && ns == "fleet-default" && cluster == "edge1"
}

func sourceSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "fleet-default", Name: "s", ResourceVersion: "71", UID: "source-uid",
			Labels: map[string]string{"app": "web", copyspec.LabelOwner: "forged"},
			Annotations: map[string]string{
				"note": "kept",
				"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"` + secretValue + `"}}`,
			},
		},
		Type:      corev1.SecretTypeOpaque,
		Data:      map[string][]byte{"password": []byte(secretValue)},
		Immutable: ptr.To(true),
	}
}

func sourceConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "cm", ResourceVersion: "72"},
		Data:       map[string]string{"k": "v"},
		BinaryData: map[string][]byte{"b": {0, 1, 2}},
	}
}

func payloadRow(name, cluster, kind, source string, phase courier.CopyPhase, keep bool) *courier.DownstreamCopy {
	r := row("fleet-default", name, "app", cluster, kind, source, phase, nil)
	r.Spec.KeepResources = keep
	r.Status.Message = "message of " + name
	return r
}

func newPayloadREST(t *testing.T, sources Sources) *PayloadREST {
	t.Helper()
	store := memstore.New[*courier.DownstreamCopy]()
	store.Replace([]*courier.DownstreamCopy{
		payloadRow("app.edge1.secret.s", "edge1", "Secret", "s", courier.CopyPhaseSynced, true),
		payloadRow("app.edge1.configmap.cm", "edge1", "ConfigMap", "cm", courier.CopyPhasePending, false),
		payloadRow("app.edge1.secret.gone", "edge1", "Secret", "gone", courier.CopyPhasePending, false),
		missingSource(payloadRow("app.edge1.secret.missing", "edge1", "Secret", "missing", courier.CopyPhaseSourceMissing, false)),
		payloadRow("app.edge1.deployment.d", "edge1", "Deployment", "d", courier.CopyPhaseInvalid, false),
		undelivered(payloadRow("old.edge1.secret.s", "edge1", "Secret", "s", courier.CopyPhaseDeleting, false)),
		undelivered(payloadRow("kept.edge1.secret.s", "edge1", "Secret", "s", courier.CopyPhaseKept, true)),
		payloadRow("app.edge2.secret.s", "edge2", "Secret", "s", courier.CopyPhaseSynced, false),
		undelivered(payloadRow("denied.edge1.secret.s", "edge1", "Secret", "s", courier.CopyPhaseDenied, false)),
	})
	return NewPayloadREST(store, sources, fakeAgents{}, upstream, guard)
}

// undelivered labels a row as the view labels a row whose copy is not
// delivered (Denied, and the rows of leftover copies: Kept, Deleting).
func undelivered(r *courier.DownstreamCopy) *courier.DownstreamCopy {
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	r.Labels[courier.LabelDeliver] = "false"
	return r
}

// guard denies the source annotated as the export rule's opt-out, as
// exportpolicy.Policy.Guard does.
func guard(obj runtime.Object) error {
	if m, ok := obj.(metav1.Object); ok && m.GetAnnotations()["courier.dev/export"] == "false" {
		return errors.New("Secret fleet-default/s is never exported: it is annotated courier.dev/export: \"false\"")
	}
	return nil
}

// optedOutSources are defaultSources with the Secret annotated as never
// exported since its row was computed.
func optedOutSources() fakeSources {
	s := sourceSecret()
	s.Annotations = map[string]string{"courier.dev/export": "false"}
	return fakeSources{objects: map[string]any{"Secret/fleet-default/s": s}}
}

func defaultSources() fakeSources {
	return fakeSources{objects: map[string]any{
		"Secret/fleet-default/s":     sourceSecret(),
		"ConfigMap/fleet-default/cm": sourceConfigMap(),
	}}
}

func asUser(name string) context.Context {
	return genericapirequest.WithUser(ctxIn("fleet-default"), &user.DefaultInfo{Name: name, Groups: []string{user.AllAuthenticated}})
}

func TestPayloadSecret(t *testing.T) {
	r := newPayloadREST(t, defaultSources())
	obj, err := r.Get(asUser("agent-edge1"), "app.edge1.secret.s", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := obj.(*corev1.Secret)
	if !ok {
		t.Fatalf("payload is a %T, want *v1.Secret", obj)
	}
	// Exactly what a push writes for this row.
	want := copyspec.Secret(sourceSecret(), "apps", copyspec.Owner{UpstreamID: upstream,
		HelmOp: types.NamespacedName{Namespace: "fleet-default", Name: "app"}, Cluster: "edge1", Keep: true})
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("payload\n %#v\nwant\n %#v", got, want)
	}
	// And what that means, spelled out.
	if got.Namespace != "apps" || got.Name != "s" || got.Type != corev1.SecretTypeOpaque || string(got.Data["password"]) != secretValue || !ptr.Deref(got.Immutable, false) {
		t.Errorf("payload object: %s/%s type %s immutable %v data %v", got.Namespace, got.Name, got.Type, got.Immutable, got.Data)
	}
	hm := types.NamespacedName{Namespace: "fleet-default", Name: "app"}
	wantLabels := map[string]string{
		"app":                     "web",
		copyspec.LabelManagedBy:   copyspec.ManagedByValue,
		copyspec.LabelOwner:       copyspec.OwnerHash(upstream, hm),
		copyspec.LabelClusterHash: copyspec.ClusterHash(upstream, "fleet-default", "edge1"),
	}
	if !maps.Equal(got.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", got.Labels, wantLabels)
	}
	wantAnnotations := map[string]string{
		"note":                                   "kept",
		copyspec.AnnotationHelmOp:                "fleet-default/app",
		copyspec.AnnotationUpstream:              upstream,
		copyspec.AnnotationSourceResourceVersion: "71",
		copyspec.AnnotationKeep:                  "true",
	}
	if !maps.Equal(got.Annotations, wantAnnotations) {
		t.Errorf("annotations %v, want %v", got.Annotations, wantAnnotations)
	}
	if got.UID != "" || got.ResourceVersion != "" {
		t.Errorf("payload carries the source's identity: uid %q rv %q", got.UID, got.ResourceVersion)
	}
}

func TestPayloadConfigMap(t *testing.T) {
	r := newPayloadREST(t, defaultSources())
	obj, err := r.Get(asUser("agent-edge1"), "app.edge1.configmap.cm", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := obj.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("payload is a %T, want *v1.ConfigMap", obj)
	}
	want := copyspec.ConfigMap(sourceConfigMap(), "apps", copyspec.Owner{UpstreamID: upstream,
		HelmOp: types.NamespacedName{Namespace: "fleet-default", Name: "app"}, Cluster: "edge1"})
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("payload\n %#v\nwant\n %#v", got, want)
	}
	if got.Data["k"] != "v" || string(got.BinaryData["b"]) != "\x00\x01\x02" {
		t.Errorf("data %v binaryData %v", got.Data, got.BinaryData)
	}
	if _, keep := got.Annotations[copyspec.AnnotationKeep]; keep {
		t.Error("a row without keepResources gives a payload marked keep")
	}
	if got.Annotations[copyspec.AnnotationSourceResourceVersion] != "72" {
		t.Errorf("source-resource-version %q", got.Annotations[copyspec.AnnotationSourceResourceVersion])
	}
}

// missingSource makes a row's spec name a source that does not exist, as
// the view computes it: no source resourceVersion.
func missingSource(r *courier.DownstreamCopy) *courier.DownstreamCopy {
	r.Spec.Source.ResourceVersion = ""
	return r
}

// TestPayloadPhases: the payload is decided from the row's label and spec,
// never from the phase it displays (which the view composes partly from
// the agent's own last report): a delivered, copyable row has a payload
// whatever its phase says, and a row whose spec names no existing source
// has none, whatever its phase says.
func TestPayloadPhases(t *testing.T) {
	all := []courier.CopyPhase{courier.CopyPhasePending, courier.CopyPhaseSynced, courier.CopyPhaseForbidden, courier.CopyPhaseConflict,
		courier.CopyPhaseUnreachable, courier.CopyPhaseSourceMissing, courier.CopyPhaseInvalid, courier.CopyPhaseDeleting, courier.CopyPhaseKept}
	for _, phase := range all {
		store := memstore.New[*courier.DownstreamCopy]()
		store.Replace([]*courier.DownstreamCopy{
			payloadRow("app.edge1.secret.s", "edge1", "Secret", "s", phase, false),
			missingSource(payloadRow("app.edge1.secret.missing", "edge1", "Secret", "missing", phase, false)),
		})
		rest := NewPayloadREST(store, defaultSources(), fakeAgents{}, upstream, nil)
		if _, err := rest.Get(asUser("agent-edge1"), "app.edge1.secret.s", nil); err != nil {
			t.Errorf("copyable row displaying %s: %v", phase, err)
		}
		// Refused before any read upstream (the read would 404 too).
		if _, err := rest.Get(asUser("agent-edge1"), "app.edge1.secret.missing", nil); !apierrors.IsNotFound(err) ||
			!strings.Contains(err.Error(), "does not exist (phase SourceMissing)") {
			t.Errorf("row without a source displaying %s: %v, want 404 from its spec", phase, err)
		}
	}
}

func TestPayloadErrors(t *testing.T) {
	tcs := []struct {
		name    string
		user    string
		row     string
		sources Sources
		code    int32
		message string
	}{
		{"no such row", "agent-edge1", "nothing", nil, http.StatusNotFound, `"nothing" not found`},
		{"another Cluster's row", "agent-edge1", "app.edge2.secret.s", nil, http.StatusForbidden, "only to the agent of Cluster fleet-default/edge2"},
		{"not an agent", "admin", "app.edge1.secret.s", nil, http.StatusForbidden, "only to the agent of Cluster fleet-default/edge1"},
		{"anonymous", user.Anonymous, "app.edge1.secret.s", nil, http.StatusForbidden, "only to the agent"},
		{"SourceMissing", "agent-edge1", "app.edge1.secret.missing", nil, http.StatusNotFound,
			`"app.edge1.secret.missing" has no payload: its source Secret fleet-default/missing does not exist (phase SourceMissing)`},
		{"Invalid", "agent-edge1", "app.edge1.deployment.d", nil, http.StatusConflict,
			`"app.edge1.deployment.d" has no payload: its phase is Invalid: kind "Deployment" cannot be copied`},
		{"Deleting", "agent-edge1", "old.edge1.secret.s", nil, http.StatusConflict, "its copy is not delivered (courier.dev/deliver=false, phase Deleting)"},
		{"Kept", "agent-edge1", "kept.edge1.secret.s", nil, http.StatusConflict, "its copy is not delivered (courier.dev/deliver=false, phase Kept)"},
		{"not delivered (Denied)", "agent-edge1", "denied.edge1.secret.s", nil, http.StatusForbidden,
			"its source may never be exported: message of denied.edge1.secret.s"},
		{"source denied since the row was computed", "agent-edge1", "app.edge1.secret.s", optedOutSources(), http.StatusForbidden,
			`Secret fleet-default/s is never exported: it is annotated courier.dev/export: "false"`},
		{"source deleted since the row was computed", "agent-edge1", "app.edge1.secret.gone", nil, http.StatusNotFound,
			"its source Secret fleet-default/gone does not exist"},
		{"upstream read fails", "agent-edge1", "app.edge1.secret.s", fakeSources{err: errors.New("connection refused")}, http.StatusInternalServerError,
			"reading Secret fleet-default/s upstream: connection refused"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			sources := tc.sources
			if sources == nil {
				sources = defaultSources()
			}
			obj, err := newPayloadREST(t, sources).Get(asUser(tc.user), tc.row, &metav1.GetOptions{})
			if err == nil {
				t.Fatalf("got a payload (%T), want an error", obj)
			}
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("error %v is not an API status", err)
			}
			if status.Status().Code != tc.code || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("got %d %q, want %d saying %q", status.Status().Code, err.Error(), tc.code, tc.message)
			}
			for _, leak := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error carries secret data: %v", err)
				}
			}
		})
	}
}

func TestPayloadWithoutUser(t *testing.T) {
	_, err := newPayloadREST(t, defaultSources()).Get(ctxIn("fleet-default"), "app.edge1.secret.s", nil)
	if !apierrors.IsForbidden(err) {
		t.Errorf("no user: %v, want 403", err)
	}
}

func TestPayloadKind(t *testing.T) {
	r := newPayloadREST(t, defaultSources())
	if gvk := r.GroupVersionKind(schema.GroupVersion{Group: "courier.dev", Version: "v1alpha1"}); gvk != corev1.SchemeGroupVersion.WithKind("Secret") {
		t.Errorf("kind %v, want v1 Secret", gvk)
	}
	if _, ok := r.New().(*corev1.Secret); !ok {
		t.Errorf("New() is a %T", r.New())
	}
	obj, err := r.Get(asUser("agent-edge1"), "app.edge1.secret.s", nil)
	if err != nil {
		t.Fatal(err)
	}
	table, err := r.ConvertToTable(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || strings.Contains(fmt.Sprint(table.Rows[0].Cells), secretValue) {
		t.Errorf("table %v", table.Rows)
	}
}
