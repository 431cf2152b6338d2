package agentauth

import (
	"context"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	testingclock "k8s.io/utils/clock/testing"
)

// rbac stands for an upstream RBAC that grants by namespace or by row
// name, and records every question it is asked.
type rbac struct {
	// byName allows a named request only for these names; empty grants
	// every name (and the coarse question).
	byName map[string]bool
	// deny refuses everything.
	deny  bool
	asked []authorizer.Attributes
}

func (r *rbac) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.asked = append(r.asked, a)
	switch {
	case r.deny:
		return authorizer.DecisionNoOpinion, "no RBAC", nil
	case len(r.byName) == 0, r.byName[a.GetName()]:
		return authorizer.DecisionAllow, "RBAC allows", nil
	}
	return authorizer.DecisionNoOpinion, "no rule for this name", nil
}

func (r *rbac) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

func (r *rbac) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

type agentRequest struct {
	user   user.Info
	method string
	url    string
}

// TestAllowCache sends requests in turn through one chain and checks, after
// each, the decision and how many questions the upstream was asked so far.
func TestAllowCache(t *testing.T) {
	agent := named("agent-edge1")
	status := func(row string) agentRequest { return agentRequest{agent, "PUT", dcp + "/" + row + "/status"} }
	type step struct {
		req     agentRequest
		advance time.Duration
		allowed bool
		asked   int
	}
	tcs := []struct {
		name  string
		rbac  rbac
		ttl   time.Duration
		steps []step
	}{{
		name: "one question per agent, verb and subresource, for any row",
		rbac: rbac{},
		ttl:  time.Minute,
		steps: []step{
			{req: status("app.edge1.secret.s"), allowed: true, asked: 1},
			{req: status("app.edge1.secret.s"), allowed: true, asked: 1},
			{req: status("app.edge1.configmap.cm"), allowed: true, asked: 1},
			{req: agentRequest{agent, "GET", dcp + "/app.edge1.secret.s/payload"}, allowed: true, asked: 2},
			{req: agentRequest{agent, "GET", dcp + "/app.edge1.configmap.cm/payload"}, allowed: true, asked: 2},
			{req: agentRequest{agent, "GET", dcp + "?watch=true&fieldSelector=spec.cluster%3Dedge1"}, allowed: true, asked: 3},
			{req: agentRequest{agent, "GET", dcp + "?watch=true&fieldSelector=spec.cluster%3Dedge1"}, allowed: true, asked: 3},
			{req: agentRequest{agent, "GET", dcp + "?fieldSelector=spec.cluster%3Dedge1"}, allowed: true, asked: 4},
		},
	}, {
		name: "each user asks for itself; the same name in other groups is another user",
		rbac: rbac{},
		ttl:  time.Minute,
		steps: []step{
			{req: status("app.edge1.secret.s"), allowed: true, asked: 1},
			{req: agentRequest{named("agent-two"), "PUT", dcp + "/app.edge2.secret.s/status"}, allowed: true, asked: 2},
			{req: agentRequest{named("agent-edge1", "extra-group"), "PUT", dcp + "/app.edge1.secret.s/status"}, allowed: true, asked: 3},
			{req: status("app.edge1.configmap.cm"), allowed: true, asked: 3},
		},
	}, {
		name: "an answer expires after the TTL",
		rbac: rbac{},
		ttl:  time.Minute,
		steps: []step{
			{req: status("app.edge1.secret.s"), allowed: true, asked: 1},
			{req: status("app.edge1.secret.s"), advance: 59 * time.Second, allowed: true, asked: 1},
			{req: status("app.edge1.secret.s"), advance: 2 * time.Second, allowed: true, asked: 2},
		},
	}, {
		name: "RBAC by row name: the coarse question is refused, each request is asked as it is, nothing kept",
		rbac: rbac{byName: map[string]bool{"app.edge1.secret.s": true}},
		ttl:  time.Minute,
		steps: []step{
			{req: status("app.edge1.secret.s"), allowed: true, asked: 2},
			{req: status("app.edge1.secret.s"), allowed: true, asked: 4},
			{req: status("app.edge1.configmap.cm"), allowed: false, asked: 6},
		},
	}, {
		name: "no RBAC: refused every time, never kept",
		rbac: rbac{deny: true},
		ttl:  time.Minute,
		steps: []step{
			{req: status("app.edge1.secret.s"), allowed: false, asked: 2},
			{req: status("app.edge1.secret.s"), allowed: false, asked: 4},
		},
	}, {
		name: "TTL 0: no cache, the upstream is asked the request itself",
		rbac: rbac{},
		ttl:  0,
		steps: []step{
			{req: status("app.edge1.secret.s"), allowed: true, asked: 1},
			{req: status("app.edge1.secret.s"), allowed: true, asked: 2},
		},
	}, {
		name: "not an agent's own request: the cache stays out of it",
		rbac: rbac{},
		ttl:  time.Minute,
		steps: []step{
			{req: agentRequest{named("admin"), "PUT", dcp + "/app.edge1.secret.s/status"}, allowed: true, asked: 1},
			{req: agentRequest{named("admin"), "PUT", dcp + "/app.edge1.secret.s/status"}, allowed: true, asked: 2},
			// The agent's own requests are kept; another Cluster's row is
			// denied before any question.
			{req: status("app.edge1.secret.s"), allowed: true, asked: 3},
			{req: agentRequest{agent, "PUT", dcp + "/app.edge2.secret.s/status"}, allowed: false, asked: 3},
			{req: agentRequest{named("admin"), "GET", dcp + "/app.edge1.secret.s/payload"}, allowed: false, asked: 3},
		},
	}}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			clock := testingclock.NewFakeClock(time.Now())
			authz, err := withDelegateAndClock(New(agents, rows), &tc.rbac, &tc.rbac, tc.ttl, clock)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				clock.Step(s.advance)
				decision, reason, _ := authz.Authorize(context.Background(), attributes(t, s.req.user, s.req.method, s.req.url))
				if got := decision == authorizer.DecisionAllow; got != s.allowed {
					t.Errorf("step %d (%s %s): allowed %v (%v %q), want %v", i, s.req.method, s.req.url, got, decision, reason, s.allowed)
				}
				if len(tc.rbac.asked) != s.asked {
					t.Errorf("step %d (%s %s): upstream asked %d times in all, want %d", i, s.req.method, s.req.url, len(tc.rbac.asked), s.asked)
				}
			}
		})
	}
}

// TestAllowCacheAsksForEveryName checks the question the cache sends: the
// request's user, verb, namespace and subresource, no name, no selector.
func TestAllowCacheAsksForEveryName(t *testing.T) {
	r := &rbac{}
	authz, err := WithDelegate(New(agents, rows), r, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u := named("agent-edge1")
	for _, url := range []string{dcp + "/app.edge1.secret.s/status", dcp + "?watch=1&fieldSelector=spec.cluster%3Dedge1"} {
		method := "GET"
		if url == dcp+"/app.edge1.secret.s/status" {
			method = "PUT"
		}
		want := attributes(t, u, method, url)
		before := len(r.asked)
		if d, _, _ := authz.Authorize(context.Background(), want); d != authorizer.DecisionAllow {
			t.Fatalf("%s %s: %v, want Allow", method, url, d)
		}
		if len(r.asked) != before+1 {
			t.Fatalf("%s %s: asked %d questions, want 1", method, url, len(r.asked)-before)
		}
		got := r.asked[before]
		fields, _ := got.GetFieldSelector()
		labels, _ := got.GetLabelSelector()
		if got.GetName() != "" || len(fields) != 0 || len(labels) != 0 {
			t.Errorf("%s %s: asked name %q, fields %v, labels %v; want the question for every name, no selector", method, url, got.GetName(), fields, labels)
		}
		if got.GetUser() != u || got.GetVerb() != want.GetVerb() || got.GetNamespace() != ws || got.GetAPIGroup() != "courier.dev" ||
			got.GetResource() != "downstreamcopies" || got.GetSubresource() != want.GetSubresource() || !got.IsResourceRequest() {
			t.Errorf("%s %s: asked %+v, want the request's user, verb, namespace, resource and subresource", method, url, got)
		}
	}
}

// TestWithReviewer: the coarse question goes to the reviewer only; when
// it does not allow, the delegate decides the request itself, and a
// request that is not an agent's own never reaches the reviewer.
func TestWithReviewer(t *testing.T) {
	u := named("agent-edge1")
	own := attributes(t, u, "GET", dcp+"?watch=1&fieldSelector=spec.cluster%3Dedge1")
	admin := attributes(t, named("admin"), "GET", dcp+"/app.edge1.secret.s")

	delegate, reviewer := &rbac{}, &rbac{}
	authz, err := WithReviewer(New(agents, rows), delegate, reviewer, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d, _, _ := authz.Authorize(context.Background(), own); d != authorizer.DecisionAllow {
			t.Fatalf("the agent's own watch: %v, want Allow", d)
		}
	}
	if len(reviewer.asked) != 1 || len(delegate.asked) != 0 {
		t.Errorf("the agent's watch twice: reviewer asked %d, delegate %d; want 1 and 0", len(reviewer.asked), len(delegate.asked))
	}
	if d, _, _ := authz.Authorize(context.Background(), admin); d != authorizer.DecisionAllow || len(reviewer.asked) != 1 || len(delegate.asked) != 1 {
		t.Errorf("someone else's request: %v, reviewer asked %d, delegate %d; want Allow, 1 and 1", d, len(reviewer.asked), len(delegate.asked))
	}

	delegate, reviewer = &rbac{}, &rbac{deny: true}
	authz, err = WithReviewer(New(agents, rows), delegate, reviewer, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := authz.Authorize(context.Background(), own); d != authorizer.DecisionAllow || len(reviewer.asked) != 1 || len(delegate.asked) != 1 {
		t.Errorf("a coarse question not allowed: %v, reviewer asked %d, delegate %d; want the delegate's Allow, 1 and 1", d, len(reviewer.asked), len(delegate.asked))
	}

	if _, err := WithReviewer(New(agents, rows), delegate, nil, time.Minute); err == nil {
		t.Error("a nil reviewer was accepted")
	}
}

func TestWithDelegateRefusesANegativeTTL(t *testing.T) {
	if _, err := WithDelegate(New(agents, rows), &rbac{}, -time.Second); err == nil {
		t.Error("a negative TTL was accepted")
	}
}

func TestCoarseKeyTellsUsersApart(t *testing.T) {
	base := func() *user.DefaultInfo {
		return &user.DefaultInfo{Name: "a", UID: "u", Groups: []string{"g1", "g2"}, Extra: map[string][]string{"k": {"v"}}}
	}
	key := func(u user.Info) [32]byte {
		return coarseKey(authorizer.AttributesRecord{User: u, Verb: "update", Namespace: ws, Resource: "downstreamcopies", Subresource: "status", ResourceRequest: true})
	}
	same := base()
	same.Extra = map[string][]string{"k": {"v"}}
	if key(base()) != key(same) {
		t.Error("the same user made two keys")
	}
	for name, mutate := range map[string]func(*user.DefaultInfo){
		"name":              func(u *user.DefaultInfo) { u.Name = "b" },
		"uid":               func(u *user.DefaultInfo) { u.UID = "v" },
		"a group less":      func(u *user.DefaultInfo) { u.Groups = []string{"g1"} },
		"groups joined":     func(u *user.DefaultInfo) { u.Groups = []string{"g1g2"} },
		"a group moved":     func(u *user.DefaultInfo) { u.Name, u.Groups = "ag1", []string{"g2"} },
		"extra value":       func(u *user.DefaultInfo) { u.Extra = map[string][]string{"k": {"w"}} },
		"extra as a group":  func(u *user.DefaultInfo) { u.Groups, u.Extra = []string{"g1", "g2", "k"}, nil },
		"extra value empty": func(u *user.DefaultInfo) { u.Extra = map[string][]string{"k": {"v", ""}} },
	} {
		u := base()
		mutate(u)
		if key(base()) == key(u) {
			t.Errorf("%s: a different user made the same key", name)
		}
	}
}
