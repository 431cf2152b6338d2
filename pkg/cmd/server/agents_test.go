package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes/fake"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/agentauth"
	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/memstore"
)

// TestPullDelivery checks the wiring: the agent authorizer's Deny comes
// before the delegated authorizer's Allow, its NoOpinion leaves the
// decision to the delegated one, and the payload configuration is filled.
// (The rules themselves are pkg/agentauth's tests.)
func TestPullDelivery(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &fleet.Cluster{}, 0, cache.Indexers{})
	index, err := agentauth.NewClusterIndex(informer)
	if err != nil {
		t.Fatal(err)
	}
	v := &views{agents: index, downstreamCopies: memstore.New[*courier.DownstreamCopy](), upstream: fake.NewClientset()}
	cfg := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	cfg.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	payloads, err := pullDelivery(cfg, v, "up", nil, agentauth.DefaultAllowCacheTTL)
	if err != nil {
		t.Fatal(err)
	}
	if payloads.Sources == nil || payloads.Agents == nil || payloads.UpstreamID != "up" {
		t.Errorf("payload configuration %+v", payloads)
	}

	admin := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	attrs := func(resource string) authorizer.Attributes {
		return authorizer.AttributesRecord{User: admin, Verb: "get", ResourceRequest: true, APIGroup: courier.GroupName,
			Resource: resource, Namespace: "ws", Name: "row"}
	}
	// The informer has not synced: every downstreamcopies request is
	// refused, and that Deny comes before the delegate's Allow.
	if d, _, _ := cfg.Authorization.Authorizer.Authorize(context.Background(), attrs("downstreamcopies")); d != authorizer.DecisionDeny {
		t.Errorf("before the Clusters are read: %v, want Deny", d)
	}
	// Where the agent authorizer has no opinion, the delegate decides.
	if d, _, _ := cfg.Authorization.Authorizer.Authorize(context.Background(), attrs("fieldcopies")); d != authorizer.DecisionAllow {
		t.Errorf("fieldcopies: %v, want the delegate's Allow", d)
	}

	cfg.Authorization.Authorizer = nil
	if _, err := pullDelivery(cfg, v, "up", nil, agentauth.DefaultAllowCacheTTL); err == nil {
		t.Error("no authorizer to delegate to: no error")
	}
}

// TestAgentReviewer: the agents' reviewer asks the upstream of
// --authorization-kubeconfig a SubjectAccessReview with the question's
// user and attributes and returns its answer; without a kubeconfig (and
// outside a cluster) there is none, and a kubeconfig that cannot be read
// is an error that names it.
func TestAgentReviewer(t *testing.T) {
	var asked atomic.Pointer[authorizationv1.SubjectAccessReview]
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var sar authorizationv1.SubjectAccessReview
		if r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" || err != nil {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		// client-go sends protobuf or JSON, as it is configured.
		if _, _, err := clientscheme.Codecs.UniversalDeserializer().Decode(body, nil, &sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		asked.Store(&sar)
		sar.Status.Allowed = sar.Spec.User == "agent-edge1"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&sar)
	}))
	defer upstream.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: up, cluster: {server: `+upstream.URL+`}}]
users: [{name: courier, user: {token: t}}]
contexts: [{name: up, context: {cluster: up, user: courier}}]
current-context: up
`), 0o600); err != nil {
		t.Fatal(err)
	}

	opts := genericoptions.NewDelegatingAuthorizationOptions()
	opts.RemoteKubeConfigFile = kubeconfig
	reviewer, err := agentReviewer(opts, 5)
	if err != nil || reviewer == nil {
		t.Fatalf("agentReviewer = %v, %v", reviewer, err)
	}
	attrs := func(name string) authorizer.Attributes {
		return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: name, Groups: []string{"courier:agents"}}, Verb: "watch",
			ResourceRequest: true, APIGroup: courier.GroupName, Resource: "downstreamcopies", Namespace: "ws"}
	}
	if d, _, err := reviewer.Authorize(context.Background(), attrs("agent-edge1")); d != authorizer.DecisionAllow || err != nil {
		t.Errorf("an allowed agent: %v, %v", d, err)
	}
	got := asked.Load()
	if got == nil || got.Spec.User != "agent-edge1" || got.Spec.ResourceAttributes == nil ||
		got.Spec.ResourceAttributes.Verb != "watch" || got.Spec.ResourceAttributes.Resource != "downstreamcopies" || got.Spec.ResourceAttributes.Namespace != "ws" {
		t.Errorf("the review sent: %+v", got)
	}
	if d, _, _ := reviewer.Authorize(context.Background(), attrs("agent-edge2")); d == authorizer.DecisionAllow {
		t.Errorf("an agent the upstream refuses: %v", d)
	}

	if r, err := agentReviewer(nil, 5); r != nil || err != nil {
		t.Errorf("no authorization options: %v, %v", r, err)
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		if r, err := agentReviewer(genericoptions.NewDelegatingAuthorizationOptions(), 5); r != nil || err != nil {
			t.Errorf("no kubeconfig outside a cluster: %v, %v", r, err)
		}
	}
	opts.RemoteKubeConfigFile = filepath.Join(t.TempDir(), "missing")
	if _, err := agentReviewer(opts, 5); err == nil || !strings.Contains(err.Error(), "agents' authorization reviews") {
		t.Errorf("a kubeconfig that cannot be read: %v", err)
	}
}

// blockingTransport answers each request once its test lets it, counting
// the requests it holds at once.
type blockingTransport struct {
	mu            sync.Mutex
	holding, most int
	arrived       chan struct{}
	answer        chan struct{}
}

func (b *blockingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.holding++
	b.most = max(b.most, b.holding)
	b.mu.Unlock()
	b.arrived <- struct{}{}
	<-b.answer
	b.mu.Lock()
	b.holding--
	b.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// TestLimitInFlight: at most n requests reach the transport until their
// bodies are closed; a request waiting for a slot gives up with its
// context.
func TestLimitInFlight(t *testing.T) {
	b := &blockingTransport{arrived: make(chan struct{}), answer: make(chan struct{})}
	rt := limitInFlight(2)(b)
	get := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream/x", nil)
		return rt.RoundTrip(req)
	}
	responses := make(chan *http.Response, 3)
	for range 3 {
		go func() {
			resp, err := get(context.Background())
			if err != nil {
				t.Error(err)
			}
			responses <- resp
		}()
	}
	<-b.arrived
	<-b.arrived
	// Two hold the slots; a third request with a context that ends gives
	// up without reaching the transport.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := get(ctx); err == nil {
		t.Error("a request whose context ended while waiting for a slot went through")
	}
	b.answer <- struct{}{}
	first := <-responses
	select {
	case <-b.arrived:
		t.Fatal("a third request reached the transport before a body was closed")
	default:
	}
	first.Body.Close()
	<-b.arrived // the third request, now that a slot is free
	b.answer <- struct{}{}
	b.answer <- struct{}{}
	for range 2 {
		(<-responses).Body.Close()
	}
	if b.most != 2 {
		t.Errorf("at most %d requests at once reached the transport, want 2", b.most)
	}
}
