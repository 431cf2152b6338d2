package payload

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/engine"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

const (
	ns     = "fleet-default"
	canary = "canary-payload-81d3"
)

var owner = copyspec.Owner{UpstreamID: "up-1", HelmOp: types.NamespacedName{Namespace: ns, Name: "app"}, Cluster: "edge2", Keep: true}

// source is an upstream Secret as a user writes it, with a label and an
// annotation of its own and one that pretends to be Courier's.
func source() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", ResourceVersion: "42",
			Labels:      map[string]string{"app": "web", copyspec.LabelOwner: "forged"},
			Annotations: map[string]string{"note": "x", copyspec.AnnotationHelmOp: "other/op"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte(canary)},
	}
}

// server answers payload GETs as Courier does: the copy as push would write
// it (copyspec, with a v1 kind and no resourceVersion of its own), or an
// API error.
type server struct {
	mu    sync.Mutex
	paths []string
	objs  map[string]any // by row name
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	parts := strings.Split(r.URL.Path, "/")
	row := parts[len(parts)-2]
	obj, ok := s.objs[row]
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		st := apierrors.NewNotFound(corev1.Resource("downstreamcopies"), row).ErrStatus
		st.Kind, st.APIVersion = "Status", "v1"
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(st)
		return
	}
	_ = json.NewEncoder(w).Encode(obj)
}

func newReader(t *testing.T, objs map[string]any) (*Reader, *server) {
	s := &server{objs: objs}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return NewReader(c.CourierV1alpha1().RESTClient()), s
}

func payloadOf(src *corev1.Secret) *corev1.Secret {
	p := copyspec.Secret(src, "apps", owner)
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	return p
}

// The reader GETs the row's payload subresource, takes the source's
// resourceVersion from the annotation and learns the upstream id; the
// engine's copy of a payload is the payload itself (copyspec drops the
// courier.dev/ keys it finds and puts back its own).
func TestReadPayload(t *testing.T) {
	payload := payloadOf(source())
	r, s := newReader(t, map[string]any{"app.edge2.secret.db": payload})
	if r.Upstream() != "" {
		t.Fatal("upstream known before any read")
	}
	obj, err := r.Read(context.Background(), engine.Source{Kind: "Secret", Namespace: ns, Name: "db", Row: ns + "/app.edge2.secret.db"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "/apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopies/app.edge2.secret.db/payload"; len(s.paths) != 1 || s.paths[0] != want {
		t.Errorf("requests %q, want one GET of %s", s.paths, want)
	}
	got := obj.(*corev1.Secret)
	if got.ResourceVersion != "42" {
		t.Errorf("resourceVersion %q, want the source's 42", got.ResourceVersion)
	}
	if r.Upstream() != "up-1" {
		t.Errorf("upstream %q, want up-1", r.Upstream())
	}
	again := copyspec.Secret(got, "apps", owner)
	payload.TypeMeta = metav1.TypeMeta{}
	if !apiequality.Semantic.DeepEqual(again, payload) {
		t.Errorf("the copy of the payload differs from the payload:\n%+v\n%+v", again.ObjectMeta, payload.ObjectMeta)
	}
}

// Errors are the API's, so the engine sees NotFound as a source not found; a
// payload that is not what the row names is refused without quoting it.
func TestReadErrors(t *testing.T) {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: map[string]string{copyspec.AnnotationSourceResourceVersion: "1"}},
		Data:       map[string]string{"k": canary}}
	noRV := payloadOf(source())
	delete(noRV.Annotations, copyspec.AnnotationSourceResourceVersion)
	r, _ := newReader(t, map[string]any{"wrong-kind": cm, "no-rv": noRV})
	ctx := context.Background()
	read := func(row string) error {
		_, err := r.Read(ctx, engine.Source{Kind: "Secret", Namespace: ns, Name: "db", Row: ns + "/" + row})
		return err
	}
	if err := read("gone"); !apierrors.IsNotFound(err) {
		t.Errorf("missing: %v, want NotFound", err)
	}
	for _, row := range []string{"wrong-kind", "no-rv"} {
		err := read(row)
		if err == nil || strings.Contains(err.Error(), canary) {
			t.Errorf("%s: %v, want an error that quotes no data", row, err)
		}
	}
	if _, err := r.Read(ctx, engine.Source{Kind: "Secret", Namespace: ns, Name: "db"}); err == nil {
		t.Error("a read without a row succeeded")
	}
	if r.Upstream() != "" {
		t.Errorf("upstream %q learned from refused payloads", r.Upstream())
	}
}
