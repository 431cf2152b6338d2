package agentauth

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// fakeAgents is a Cluster index held in a map.
type fakeAgents struct {
	byUser   map[string][]types.NamespacedName
	unsynced bool
}

func (f fakeAgents) ClustersOf(u string) []types.NamespacedName { return f.byUser[u] }
func (f fakeAgents) HasSynced() bool                            { return !f.unsynced }

// fakeRows maps "namespace/name" to the row's Cluster.
type fakeRows map[string]string

func (f fakeRows) ClusterOf(ns, name string) (string, bool) {
	c, ok := f[ns+"/"+name]
	return c, ok
}

// delegate stands for the upstream RBAC: it allows every authenticated
// user, has no opinion on anonymous requests, and records that it was
// asked.
type delegate struct{ asked int }

func (d *delegate) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	d.asked++
	if a.GetUser() == nil || a.GetUser().GetName() == user.Anonymous {
		return authorizer.DecisionNoOpinion, "no RBAC", nil
	}
	return authorizer.DecisionAllow, "RBAC allows", nil
}

func (d *delegate) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(d.Authorize(ctx, a))
}

func (d *delegate) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

const ws = "fleet-default"

var (
	edge1 = types.NamespacedName{Namespace: ws, Name: "edge1"}
	edge2 = types.NamespacedName{Namespace: ws, Name: "edge2"}
	far   = types.NamespacedName{Namespace: "ws2", Name: "far"}

	agents = fakeAgents{byUser: map[string][]types.NamespacedName{
		"agent-edge1": {edge1},
		"agent-edge2": {edge2},
		"agent-two":   {edge2, far},
		// A Cluster naming the anonymous user makes no one its agent.
		user.Anonymous: {edge1},
	}}
	rows = fakeRows{
		ws + "/app.edge1.secret.s":     "edge1",
		ws + "/app.edge1.configmap.cm": "edge1",
		ws + "/app.edge2.secret.s":     "edge2",
		"ws2/app.far.secret.s":         "far",
	}
)

const dcp = "/apis/courier.dev/v1alpha1/namespaces/" + ws + "/downstreamcopies"

// attributes builds what the generic server's filters hand the authorizer
// for a request: request info parsed from the URL, then the attributes,
// field selector included.
func attributes(t *testing.T, u user.Info, method, url string) authorizer.Attributes {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	factory := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	info, err := factory.NewRequestInfo(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx := request.WithRequestInfo(context.Background(), info)
	if u != nil {
		ctx = request.WithUser(ctx, u)
	}
	attrs, err := filters.GetAuthorizerAttributes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

func named(name string, groups ...string) user.Info {
	return &user.DefaultInfo{Name: name, Groups: append(groups, user.AllAuthenticated)}
}

var anonymous = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

func TestAuthorize(t *testing.T) {
	agent := named("agent-edge1")
	admin := named("admin", user.SystemPrivilegedGroup)
	tcs := []struct {
		name   string
		user   user.Info
		method string
		url    string
		// reason is empty when the request must reach the delegate (and
		// be allowed by it); otherwise the deny reason must contain it.
		reason string
	}{
		// The agent on its own rows: through to the delegate.
		{"agent lists its rows", agent, "GET", dcp + "?fieldSelector=spec.cluster%3Dedge1", ""},
		{"agent watches its rows", agent, "GET", dcp + "?watch=true&fieldSelector=spec.cluster%3D%3Dedge1", ""},
		{"agent watch-lists its rows", agent, "GET", dcp + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&fieldSelector=spec.cluster%3Dedge1", ""},
		{"agent narrows further", agent, "GET", dcp + "?fieldSelector=status.phase%3DSynced,spec.cluster%3Dedge1", ""},
		{"agent gets its row", agent, "GET", dcp + "/app.edge1.secret.s", ""},
		{"agent reads its payload", agent, "GET", dcp + "/app.edge1.configmap.cm/payload", ""},
		{"agent reports its status", agent, "PUT", dcp + "/app.edge1.secret.s/status", ""},
		{"agent reads discovery", agent, "GET", "/apis/courier.dev/v1alpha1", ""},
		{"agent reads OpenAPI", agent, "GET", "/openapi/v3/apis/courier.dev/v1alpha1", ""},
		{"agent of two Clusters lists the other one's rows", named("agent-two"), "GET", "/apis/courier.dev/v1alpha1/namespaces/ws2/downstreamcopies?fieldSelector=spec.cluster%3Dfar", ""},

		// The agent beyond its rows: denied.
		{"agent lists without a selector", agent, "GET", dcp, "fieldSelector spec.cluster=<its Cluster>"},
		{"agent watches without a selector", agent, "GET", dcp + "?watch=true", "may watch downstreamcopies only"},
		{"agent selects by another field", agent, "GET", dcp + "?fieldSelector=metadata.name%3Dapp.edge1.secret.s", "fieldSelector spec.cluster"},
		{"agent lists another Cluster's rows", agent, "GET", dcp + "?fieldSelector=spec.cluster%3Dedge2", "fieldSelector spec.cluster"},
		{"agent watches another Cluster's rows", agent, "GET", dcp + "?watch=1&fieldSelector=spec.cluster%3Dedge2", "fieldSelector spec.cluster"},
		{"agent excludes rather than pins", agent, "GET", dcp + "?fieldSelector=spec.cluster!%3Dedge2", "fieldSelector spec.cluster"},
		{"agent lists in another namespace", agent, "GET", "/apis/courier.dev/v1alpha1/namespaces/ws2/downstreamcopies?fieldSelector=spec.cluster%3Dedge1", "its Cluster's namespace"},
		{"agent lists all namespaces", agent, "GET", "/apis/courier.dev/v1alpha1/downstreamcopies?fieldSelector=spec.cluster%3Dedge1", "its Cluster's namespace"},
		{"agent uses the old watch path", agent, "GET", "/apis/courier.dev/v1alpha1/watch/namespaces/" + ws + "/downstreamcopies?fieldSelector=spec.cluster%3Dedge1", "fieldSelector spec.cluster"},
		{"agent gets another Cluster's row", agent, "GET", dcp + "/app.edge2.secret.s", "is not a row of its Cluster"},
		{"agent gets a row that does not exist", agent, "GET", dcp + "/nothing", "is not a row of its Cluster"},
		{"agent reads another Cluster's payload", agent, "GET", dcp + "/app.edge2.secret.s/payload", "is not a row of its Cluster"},
		{"agent reports another Cluster's status", agent, "PUT", dcp + "/app.edge2.secret.s/status", "is not a row of its Cluster"},
		{"agent patches its status", agent, "PATCH", dcp + "/app.edge1.secret.s/status", "not patch downstreamcopies.courier.dev/status"},
		{"agent deletes a row", agent, "DELETE", dcp + "/app.edge1.secret.s", "not delete downstreamcopies.courier.dev"},
		{"agent reads fieldcopies", agent, "GET", "/apis/courier.dev/v1alpha1/namespaces/" + ws + "/fieldcopies", "not list fieldcopies.courier.dev"},
		{"agent reads Secrets", agent, "GET", "/api/v1/namespaces/" + ws + "/secrets", "not list secrets"},
		{"agent reads metrics", agent, "GET", "/metrics", "not get /metrics"},

		// Payloads for anyone else: denied, a cluster-admin included.
		{"admin reads a payload", admin, "GET", dcp + "/app.edge1.secret.s/payload", `user "admin" is not an agent`},
		{"another Cluster's agent reads a payload", named("agent-edge2"), "GET", dcp + "/app.edge1.secret.s/payload", "is not a row of its Cluster"},
		{"anonymous reads a payload", anonymous, "GET", dcp + "/app.edge1.secret.s/payload", "payloads are served only to the agent"},
		{"no user reads a payload", nil, "GET", dcp + "/app.edge1.secret.s/payload", "an unauthenticated request is not an agent"},

		// Everyone else: the delegate decides.
		{"admin lists every row", admin, "GET", "/apis/courier.dev/v1alpha1/downstreamcopies", ""},
		{"admin reports a status", admin, "PUT", dcp + "/app.edge1.secret.s/status", ""},
		{"a user reads fieldcopies", named("alice"), "GET", "/apis/courier.dev/v1alpha1/fieldcopies", ""},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			d := &delegate{}
			authz, err := WithDelegate(New(agents, rows), d, DefaultAllowCacheTTL)
			if err != nil {
				t.Fatal(err)
			}
			decision, reason, err := authz.Authorize(context.Background(), attributes(t, tc.user, tc.method, tc.url))
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			switch {
			case tc.reason == "" && (decision != authorizer.DecisionAllow || d.asked != 1):
				t.Errorf("want the delegate's Allow, got %v (%q), delegate asked %d times", decision, reason, d.asked)
			case tc.reason != "" && (decision != authorizer.DecisionDeny || d.asked != 0):
				t.Errorf("want Deny before the delegate, got %v (%q), delegate asked %d times", decision, reason, d.asked)
			case tc.reason != "" && !strings.Contains(reason, tc.reason):
				t.Errorf("reason %q does not say %q", reason, tc.reason)
			}
		})
	}
}

// TestAuthorizeAnonymousList checks that an anonymous list is left to the
// delegate, which here has no opinion: the request is not allowed.
func TestAuthorizeAnonymousList(t *testing.T) {
	d := &delegate{}
	authz, err := WithDelegate(New(agents, rows), d, DefaultAllowCacheTTL)
	if err != nil {
		t.Fatal(err)
	}
	decision, _, err := authz.Authorize(context.Background(), attributes(t, anonymous, "GET", dcp+"?fieldSelector=spec.cluster%3Dedge1"))
	if decision == authorizer.DecisionAllow || err != nil || d.asked != 1 {
		t.Errorf("anonymous list: %v, %v, delegate asked %d times", decision, err, d.asked)
	}
}

func TestAuthorizeBeforeClustersSynced(t *testing.T) {
	a := New(fakeAgents{byUser: agents.byUser, unsynced: true}, rows)
	for _, url := range []string{dcp + "?fieldSelector=spec.cluster%3Dedge1", dcp + "/app.edge1.secret.s/payload", dcp} {
		decision, reason, _ := a.Authorize(context.Background(), attributes(t, named("agent-edge1"), "GET", url))
		if decision != authorizer.DecisionDeny || !strings.Contains(reason, "has not read the Fleet Clusters yet") {
			t.Errorf("%s before the Clusters are read: %v %q, want Deny", url, decision, reason)
		}
	}
	// What is not a downstreamcopies request is not held up.
	if decision, _, _ := a.Authorize(context.Background(), attributes(t, named("alice"), "GET", "/apis/courier.dev/v1alpha1/fieldcopies")); decision != authorizer.DecisionNoOpinion {
		t.Errorf("fieldcopies before the Clusters are read: %v, want NoOpinion", decision)
	}
}

func TestAuthorizeUnreadableSelector(t *testing.T) {
	attrs := authorizer.AttributesRecord{
		User: named("agent-edge1"), Verb: "list", ResourceRequest: true, APIGroup: "courier.dev", APIVersion: "v1alpha1",
		Resource: "downstreamcopies", Namespace: ws, FieldSelectorParsingErr: errBadSelector,
	}
	decision, reason, _ := New(agents, rows).Authorize(context.Background(), attrs)
	if decision != authorizer.DecisionDeny || !strings.Contains(reason, "cannot be read") {
		t.Errorf("unreadable selector: %v %q, want Deny", decision, reason)
	}
}

type selectorError struct{}

func (selectorError) Error() string { return "bad selector" }

var errBadSelector error = selectorError{}

func TestIsAgentOf(t *testing.T) {
	a := New(agents, rows)
	for _, tc := range []struct {
		user    user.Info
		cluster types.NamespacedName
		want    bool
	}{
		{named("agent-edge1"), edge1, true},
		{named("agent-edge1"), edge2, false},
		{named("agent-two"), far, true},
		{named("admin", user.SystemPrivilegedGroup), edge1, false},
		{anonymous, edge1, false},
		// A user named system:anonymous who somehow is authenticated is
		// still not trusted as an agent.
		{named(user.Anonymous), edge1, false},
		{nil, edge1, false},
	} {
		if got := a.IsAgentOf(tc.user, tc.cluster.Namespace, tc.cluster.Name); got != tc.want {
			t.Errorf("IsAgentOf(%v, %s) = %v, want %v", tc.user, tc.cluster, got, tc.want)
		}
	}
}
