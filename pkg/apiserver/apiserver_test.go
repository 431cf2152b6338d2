package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"

	"github.com/courier-dev/courier/pkg/agentauth"
	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/copyspec"
	courieropenapi "github.com/courier-dev/courier/pkg/generated/openapi"
	"github.com/courier-dev/courier/pkg/memstore"
)

// sources serves one Secret and one ConfigMap in fleet-default.
type sources struct{}

func (sources) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if ns != "fleet-default" || name != "s" {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "5"},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("pw")}}, nil
}

func (sources) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if ns != "fleet-default" || name != "cm" {
		return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "6"},
		Data: map[string]string{"k": "v"}}, nil
}

// SourceVersion: the two sources are at the versions above.
func (sources) SourceVersion(_ context.Context, ns, kind, name string) (string, bool, error) {
	switch {
	case ns == "fleet-default" && kind == "Secret" && name == "s":
		return "5", true, nil
	case ns == "fleet-default" && kind == "ConfigMap" && name == "cm":
		return "6", true, nil
	}
	return "", false, nil
}

// agents: agent-edge1 is the agent of fleet-default/edge1.
type agents struct{}

func (agents) ClustersOf(u string) []types.NamespacedName {
	if u == "agent-edge1" {
		return []types.NamespacedName{{Namespace: "fleet-default", Name: "edge1"}}
	}
	return nil
}
func (agents) HasSynced() bool { return true }

// dcpRow is a row as the view computes it for a source that exists (the
// payload is decided from the spec: a row without a source
// resourceVersion names a missing source).
func dcpRow(name, kind, source string) *courier.DownstreamCopy {
	return &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name},
		Spec: courier.DownstreamCopySpec{HelmOp: "app", Cluster: "edge1",
			Source: courier.CopySource{Kind: kind, Name: source, ResourceVersion: "4"}, Target: courier.CopyTarget{Namespace: "apps", Name: source}},
		Status: courier.DownstreamCopyStatus{Phase: courier.CopyPhaseSynced},
	}
}

// testStore is the row store of the last testServer.
var testStore *memstore.Store[*courier.DownstreamCopy]

// testServer is Courier's API server with the agent authorizer in front
// of one that allows everything, and an authenticator that takes the user
// from the X-Test-User header. It serves from a handler, without a port.
func testServer(t testing.TB) http.Handler {
	t.Helper()
	h, _ := testServerWithReports(t)
	return h
}

// reports records what Record was given.
type reports struct {
	mu    sync.Mutex
	calls []string
}

func (r *reports) Record(_ context.Context, c types.NamespacedName, row string, e clusterstatus.Entry, interval time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%s %s %s %q %s", c, row, e.Phase, e.Message, interval))
	return nil
}

// Holds: a report never holds what an agent sends (every report is new).
func (r *reports) Holds(types.NamespacedName, string, clusterstatus.Entry) bool { return false }

func testServerWithReports(t testing.TB) (http.Handler, *reports) {
	t.Helper()
	rep := &reports{}
	store := memstore.New[*courier.DownstreamCopy]()
	testStore = store
	store.Replace([]*courier.DownstreamCopy{dcpRow("app.edge1.secret.s", "Secret", "s"), dcpRow("app.edge1.configmap.cm", "ConfigMap", "cm")})
	agentAuthz := agentauth.New(agents{}, agentauth.StoreRows{Store: store})

	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.ExternalAddress = "127.0.0.1:8443"
	cfg.LoopbackClientConfig = &rest.Config{}
	cfg.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	namer := openapi.NewDefinitionNamer(Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(courieropenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(courieropenapi.GetOpenAPIDefinitions, namer)
	cfg.Authentication.Authenticator = authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		name := req.Header.Get("X-Test-User")
		if name == "" {
			return nil, false, nil
		}
		return &authenticator.Response{User: &user.DefaultInfo{Name: name, Groups: []string{user.AllAuthenticated}}}, true, nil
	})
	authz, err := agentauth.WithDelegate(agentAuthz, authorizerfactory.NewAlwaysAllowAuthorizer(), agentauth.DefaultAllowCacheTTL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Authorization.Authorizer = authz

	c := &Config{GenericConfig: cfg, ExtraConfig: ExtraConfig{
		DownstreamCopies: store,
		FieldCopies:      memstore.New[*courier.FieldCopy](),
		Payloads:         PayloadConfig{Sources: sources{}, Agents: agentAuthz, UpstreamID: "up", Reports: rep},
		Summaries:        SummaryConfig{Store: testSummaries(), Sources: sources{}},
	}}
	s, err := c.Complete().New()
	if err != nil {
		t.Fatal(err)
	}
	s.GenericAPIServer.PrepareRun()
	return s.GenericAPIServer.Handler, rep
}

func get(t *testing.T, h http.Handler, user, path string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.Header.Set("X-Test-User", user)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, body
}

const payloadPath = "/apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopies/"

func TestPayloadServed(t *testing.T) {
	h := testServer(t)

	t.Run("discovery lists the subresource", func(t *testing.T) {
		code, body := get(t, h, "admin", "/apis/courier.dev/v1alpha1")
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		var list metav1.APIResourceList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "downstreamcopies/payload" })
		if i < 0 {
			t.Fatalf("discovery has no downstreamcopies/payload: %s", body)
		}
		r := list.APIResources[i]
		if r.Group != "" || r.Version != "v1" || r.Kind != "Secret" || !r.Namespaced || !slices.Equal(r.Verbs, metav1.Verbs{"get"}) {
			t.Errorf("downstreamcopies/payload in discovery: %+v", r)
		}
	})
	t.Run("a Secret row's payload is a v1 Secret", func(t *testing.T) {
		code, body := get(t, h, "agent-edge1", payloadPath+"app.edge1.secret.s/payload")
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		var s corev1.Secret
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		if s.APIVersion != "v1" || s.Kind != "Secret" || s.Namespace != "apps" || s.Name != "s" || string(s.Data["password"]) != "pw" ||
			s.Labels["courier.dev/managed-by"] != "courier" || s.Annotations["courier.dev/helmop"] != "fleet-default/app" {
			t.Errorf("payload: %s", body)
		}
	})
	t.Run("a ConfigMap row's payload is a v1 ConfigMap", func(t *testing.T) {
		code, body := get(t, h, "agent-edge1", payloadPath+"app.edge1.configmap.cm/payload")
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		var cm corev1.ConfigMap
		if err := json.Unmarshal(body, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Data["k"] != "v" || cm.Labels["courier.dev/cluster-hash"] != copyspec.ClusterHash("up", "fleet-default", "edge1") {
			t.Errorf("payload: %s", body)
		}
	})
	t.Run("anyone else is refused by the authorizer", func(t *testing.T) {
		code, body := get(t, h, "admin", payloadPath+"app.edge1.secret.s/payload")
		if code != http.StatusForbidden || !strings.Contains(string(body), "payloads are served only to the agent") || strings.Contains(string(body), "cHc=") {
			t.Errorf("admin: %d %s", code, body)
		}
	})
	t.Run("the OpenAPI spec describes the payload", func(t *testing.T) {
		code, body := get(t, h, "admin", "/openapi/v2")
		if code != http.StatusOK {
			t.Fatalf("%d %.300s", code, body)
		}
		for _, want := range []string{`"io.k8s.api.core.v1.Secret"`, `/apis/courier.dev/v1alpha1/namespaces/{namespace}/downstreamcopies/{name}/payload`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/openapi/v2 lacks %s", want)
			}
		}
		code, body = get(t, h, "admin", "/openapi/v3/apis/courier.dev/v1alpha1")
		if code != http.StatusOK || !strings.Contains(string(body), `"io.k8s.api.core.v1.Secret"`) {
			t.Errorf("/openapi/v3: %d %.300s", code, body)
		}
	})
}

func put(t *testing.T, h http.Handler, user, path, body string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPut, path, strings.NewReader(body))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-User", user)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, b
}

// TestStatusReported puts a report through the whole handler chain, as
// the generated client's UpdateStatus sends it.
func TestStatusReported(t *testing.T) {
	h, rep := testServerWithReports(t)
	body := func(name, phase string) string {
		return `{"apiVersion":"courier.dev/v1alpha1","kind":"DownstreamCopy","metadata":{"name":"` + name +
			`","namespace":"fleet-default","annotations":{"courier.dev/report-interval":"2s"}},"spec":{"helmOp":"x","cluster":"edge9"},` +
			`"status":{"phase":"` + phase + `","message":"copied","syncedResourceVersion":"5"}}`
	}
	t.Run("discovery lists update only", func(t *testing.T) {
		_, b := get(t, h, "admin", "/apis/courier.dev/v1alpha1")
		var list metav1.APIResourceList
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "downstreamcopies/status" })
		if i < 0 || !slices.Equal(list.APIResources[i].Verbs, metav1.Verbs{"update"}) || list.APIResources[i].Kind != "DownstreamCopy" {
			t.Errorf("downstreamcopies/status in discovery: %s", b)
		}
	})
	t.Run("the agent reports", func(t *testing.T) {
		code, b := put(t, h, "agent-edge1", payloadPath+"app.edge1.secret.s/status", body("app.edge1.secret.s", "Conflict"))
		var row courier.DownstreamCopy
		if code != http.StatusOK || json.Unmarshal(b, &row) != nil || row.Status.Phase != "Conflict" || row.Spec.Cluster != "edge1" {
			t.Fatalf("%d %s", code, b)
		}
		want := `fleet-default/edge1 app.edge1.secret.s Conflict "copied" 2s`
		if len(rep.calls) != 1 || rep.calls[0] != want {
			t.Errorf("recorded %q, want %q", rep.calls, want)
		}
	})
	t.Run("a name that is not the URL's", func(t *testing.T) {
		code, b := put(t, h, "agent-edge1", payloadPath+"app.edge1.secret.s/status", body("app.edge1.configmap.cm", "Synced"))
		if code != http.StatusBadRequest {
			t.Errorf("%d %s", code, b)
		}
	})
	t.Run("an unknown phase", func(t *testing.T) {
		code, b := put(t, h, "agent-edge1", payloadPath+"app.edge1.secret.s/status", body("app.edge1.secret.s", "Exploded"))
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "status.phase") {
			t.Errorf("%d %s", code, b)
		}
	})
	t.Run("anyone else, allowed by the delegate, is refused by the storage", func(t *testing.T) {
		code, b := put(t, h, "admin", payloadPath+"app.edge1.secret.s/status", body("app.edge1.secret.s", "Synced"))
		if code != http.StatusForbidden || !strings.Contains(string(b), "only by the courier-agent of its Cluster") {
			t.Errorf("%d %s", code, b)
		}
	})
	if len(rep.calls) != 1 {
		t.Errorf("refused reports were recorded: %q", rep.calls)
	}
}
