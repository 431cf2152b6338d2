package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned/scheme"
)

// agentUser is the upstream user of cluster's agent.
func agentUser(cluster string) string { return "agent-" + cluster }

// agentGroup is the group every simulated agent's identity is in: the
// group artifacts/flowcontrol/agents.yaml matches, as docs/pull.md
// recommends for many agents.
const agentGroup = "courier:agents"

// asAgent makes req the agent user's, impersonated by the upstream admin's
// client, in agentGroup.
func asAgent(req *rest.Request, user string) *rest.Request {
	return req.SetHeader("Impersonate-User", user).SetHeader("Impersonate-Group", agentGroup)
}

// applyAgentFlowSchema creates the flow control of
// artifacts/flowcontrol/agents.yaml (the agents' own Limited priority
// level and the FlowSchema that puts their requests there, as the server
// chart installs them) unless COURIER_BENCH_PULL_FLOWSCHEMA=0, and
// returns whether it did and how to remove them.
func applyAgentFlowSchema(t *testing.T, ctx context.Context, up kubernetes.Interface) (bool, func()) {
	t.Helper()
	if os.Getenv("COURIER_BENCH_PULL_FLOWSCHEMA") == "0" {
		return false, func() {}
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "artifacts", "flowcontrol", "agents.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var level *flowcontrolv1.PriorityLevelConfiguration
	var schema *flowcontrolv1.FlowSchema
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("artifacts/flowcontrol/agents.yaml: %v", err)
		}
		switch meta.Kind {
		case "PriorityLevelConfiguration":
			level = &flowcontrolv1.PriorityLevelConfiguration{}
			err = yaml.UnmarshalStrict([]byte(doc), level)
		case "FlowSchema":
			schema = &flowcontrolv1.FlowSchema{}
			err = yaml.UnmarshalStrict([]byte(doc), schema)
		}
		if err != nil {
			t.Fatalf("artifacts/flowcontrol/agents.yaml: %v", err)
		}
	}
	if level == nil || schema == nil {
		t.Fatal("artifacts/flowcontrol/agents.yaml: want a PriorityLevelConfiguration and a FlowSchema")
	}
	if _, err := up.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, level, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := up.FlowcontrolV1().FlowSchemas().Create(ctx, schema, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return true, func() {
		_ = up.FlowcontrolV1().FlowSchemas().Delete(ctx, schema.Name, metav1.DeleteOptions{})
		_ = up.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, level.Name, metav1.DeleteOptions{})
	}
}

// bindAgents binds the ClusterRole courier:agent in ws to the agents'
// group (one RoleBinding, one subject), as docs/pull.md recommends for
// many agents: what lets an agent reach Courier at all; Courier's
// authorizer then narrows it to its Cluster's rows. The upstream's RBAC
// compares a request's user with every subject of every binding in the
// namespace, so one binding naming 10,000 users, or 10,000 bindings, cost
// it a scan of 10,000 subjects for each agent request (about a tenth of
// its CPU while agents reconnected, docs/benchmarks.md).
func bindAgents(t *testing.T, ctx context.Context, up kubernetes.Interface, ws string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "courier-agents", Namespace: ws},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "courier:agent"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: agentGroup}},
	}
	if _, err := up.RbacV1().RoleBindings(ws).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// watchAs opens a watch of ws's rows as user, impersonated by fc's
// (the upstream admin's) client.
func watchAs(ctx context.Context, fc versioned.Interface, ws, user string, opts metav1.ListOptions) (watch.Interface, error) {
	return watchRequest(fc, ws, user, opts).Watch(ctx)
}

// watchRequest is the request of user's watch of ws's rows with opts.
func watchRequest(fc versioned.Interface, ws, user string, opts metav1.ListOptions) *rest.Request {
	opts.Watch = true
	return asAgent(fc.CourierV1alpha1().RESTClient().Get(), user).
		Namespace(ws).Resource("downstreamcopies").VersionedParams(&opts, scheme.ParameterCodec)
}

// agentsRefused checks that the watches are authorized as the agents,
// not as the admin who impersonates them: the first agent is refused, by
// Courier's agent authorizer (its reason names the agent), a watch without
// its selector and one with the second Cluster's, and allowed its own.
// Waited for, since Courier reads the Clusters' annotations from a watch.
func agentsRefused(t *testing.T, ctx context.Context, fc versioned.Interface, ws string, name func(int) string) {
	t.Helper()
	user := agentUser(name(1))
	cases := []struct {
		what     string
		selector string
		refused  bool
	}{
		{"without its selector", "", true},
		{"with another Cluster's selector", "spec.cluster=" + name(2), true},
		{"with its own selector", "spec.cluster=" + name(1), false},
	}
	for _, c := range cases {
		var last error
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			w, err := watchAs(ctx, fc, ws, user, metav1.ListOptions{FieldSelector: c.selector})
			if w != nil {
				w.Stop()
			}
			last = err
			if c.refused {
				return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "is the courier-agent of Cluster"), nil
			}
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("a watch as %s %s: want refused=%t by Courier's agent authorizer, last answer: %v", user, c.what, c.refused, last)
		}
	}
	results.note("pull: the watches are the agents' own users (impersonated); Courier's agent authorizer refused %s a watch without its selector "+
		"and one with another Cluster's, and allowed its own", user)
}

// waitRows waits until ws holds want rows.
func waitRows(ctx context.Context, fc versioned.Interface, ws string, want int) error {
	deadline := time.Now().Add(3*time.Minute + time.Duration(want)*20*time.Millisecond)
	for {
		l, err := fc.CourierV1alpha1().DownstreamCopies(ws).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == want {
			return nil
		}
		if time.Now().After(deadline) {
			got := -1
			if l != nil {
				got = len(l.Items)
			}
			return fmt.Errorf("%s holds %d rows after 3 minutes, want %d (%v)", ws, got, want, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
