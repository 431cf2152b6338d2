package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The headers a kube-apiserver's priority and fairness puts on every
// answer: which FlowSchema and priority level the request was classified
// into.
const (
	headerFlowSchemaUID    = "X-Kubernetes-Pf-Flowschema-Uid"
	headerPriorityLevelUID = "X-Kubernetes-Pf-Prioritylevel-Uid"
)

// TestAgentFlowControl renders the server chart as a user installs it
// (defaults), checks that it holds the same priority level and FlowSchema
// as artifacts/flowcontrol, creates them in the suite's real
// kube-apiserver, and checks where it classifies requests: an agent's
// list, watch, payload read and report (as a member of courier:agents, and
// as a ServiceAccount of the Fleet workspace) land in courier-agents, a
// Limited level; the same identity's other requests, and another user's
// list of the rows, do not.
func TestAgentFlowControl(t *testing.T) {
	chart := decodeAll(t, helm(t, "template", "courier", chartDir, "-n", installNamespace))
	data, err := os.ReadFile(filepath.Join(repoRoot, "artifacts", "flowcontrol", "agents.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plain := decodeAll(t, string(data))
	for _, kind := range []string{"PriorityLevelConfiguration", "FlowSchema"} {
		if got, want := find(t, chart, kind, "courier-agents").Object["spec"], find(t, plain, kind, "courier-agents").Object["spec"]; !reflect.DeepEqual(got, want) {
			t.Errorf("the chart's %s spec\n  %v\nartifacts/flowcontrol's\n  %v", kind, got, want)
		}
	}
	checkLevelSpec(t, find(t, chart, "PriorityLevelConfiguration", "courier-agents"), find(t, chart, "FlowSchema", "courier-agents"))

	// Created for real, not dry-run: the API accepts them and classifies by them.
	t.Cleanup(func() {
		_, _ = env.Kubectl(context.Background(), env.Upstream, "delete", "-f", filepath.Join(repoRoot, "artifacts", "flowcontrol"), "--ignore-not-found")
	})
	kubectl(t, "apply", "-f", filepath.Join(repoRoot, "artifacts", "flowcontrol"))
	kube, err := kubernetes.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fs, err := kube.FlowcontrolV1().FlowSchemas().Get(ctx, "courier-agents", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := kube.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "courier-agents", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fs.Status.Conditions {
		if c.Type == "Dangling" && c.Status == "True" {
			t.Errorf("FlowSchema courier-agents is dangling: %s", c.Message)
		}
	}

	const ns = "fleet-default"
	_, _ = env.Kubectl(context.Background(), env.Upstream, "create", "namespace", ns)
	rows := "/apis/courier.dev/v1alpha1/namespaces/" + ns + "/downstreamcopies"
	agent := rest.ImpersonationConfig{UserName: "edge-agent", Groups: []string{"courier:agents", "system:authenticated"}}
	sa := rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":courier-agent-edge",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	other := rest.ImpersonationConfig{UserName: "someone", Groups: []string{"system:authenticated"}}
	for _, tc := range []struct {
		name   string
		as     rest.ImpersonationConfig
		method string
		path   string
		ours   bool
	}{
		{"agent group: list its rows", agent, http.MethodGet, rows + "?fieldSelector=spec.cluster%3Dedge", true},
		{"agent group: watch its rows", agent, http.MethodGet, rows + "?fieldSelector=spec.cluster%3Dedge&watch=true&timeoutSeconds=1", true},
		{"agent group: read a payload", agent, http.MethodGet, rows + "/app.edge.secret.db/payload", true},
		{"agent group: report a status", agent, http.MethodPut, rows + "/app.edge.secret.db/status", true},
		{"agent ServiceAccount: list its rows", sa, http.MethodGet, rows + "?fieldSelector=spec.cluster%3Dedge", true},
		{"agent ServiceAccount: report a status", sa, http.MethodPut, rows + "/app.edge.secret.db/status", true},
		// Positive controls: the schema does not take what is not an agent's.
		{"agent group: anything else", agent, http.MethodGet, "/api/v1/namespaces/" + ns + "/configmaps", false},
		{"another user: list the rows", other, http.MethodGet, rows, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The kube-apiserver's flow control picks new objects up within
			// seconds: wait for the first classification, then hold to it.
			eventually(t, "the classification of "+tc.method+" "+tc.path, func() (bool, string) {
				fsUID, plUID, err := classify(ctx, tc.as, tc.method, tc.path)
				if err != nil {
					return false, err.Error()
				}
				matched := fsUID == string(fs.UID) && plUID == string(pl.UID)
				if tc.ours {
					return matched, "classified into FlowSchema " + fsUID + ", level " + plUID + "; want courier-agents' " + string(fs.UID) + ", " + string(pl.UID)
				}
				return fsUID != "" && fsUID != string(fs.UID), "classified into FlowSchema " + fsUID + "; want another than courier-agents' " + string(fs.UID)
			})
		})
	}
}

// checkLevelSpec checks what docs/pull.md promises of the level and the
// schema: Limited (never exempt), fair queuing, one flow per identity,
// and only the agents' requests of downstreamcopies.
func checkLevelSpec(t *testing.T, pl, fs *unstructured.Unstructured) {
	t.Helper()
	typ, _, _ := unstructured.NestedString(pl.Object, "spec", "type")
	limit, _, _ := unstructured.NestedString(pl.Object, "spec", "limited", "limitResponse", "type")
	if typ != "Limited" || limit != "Queue" {
		t.Errorf("PriorityLevelConfiguration courier-agents: type %q, limitResponse %q; want Limited and Queue", typ, limit)
	}
	level, _, _ := unstructured.NestedString(fs.Object, "spec", "priorityLevelConfiguration", "name")
	dist, _, _ := unstructured.NestedString(fs.Object, "spec", "distinguisherMethod", "type")
	if level != "courier-agents" || dist != "ByUser" {
		t.Errorf("FlowSchema courier-agents: level %q, distinguisher %q; want courier-agents and ByUser", level, dist)
	}
	rules, _, _ := unstructured.NestedSlice(fs.Object, "spec", "rules")
	for _, r := range rules {
		rule := r.(map[string]any)
		if rule["nonResourceRules"] != nil {
			t.Errorf("FlowSchema courier-agents has non-resource rules: %v", rule)
		}
		res, _, _ := unstructured.NestedSlice(rule, "resourceRules")
		for _, rr := range res {
			groups, _, _ := unstructured.NestedStringSlice(rr.(map[string]any), "apiGroups")
			resources, _, _ := unstructured.NestedStringSlice(rr.(map[string]any), "resources")
			for _, r := range resources {
				if !strings.HasPrefix(r, "downstreamcopies") {
					t.Errorf("FlowSchema courier-agents matches resource %q", r)
				}
			}
			if !reflect.DeepEqual(groups, []string{"courier.dev"}) {
				t.Errorf("FlowSchema courier-agents matches API groups %v, want courier.dev only", groups)
			}
		}
	}
}

// classify sends one request as the impersonated identity and returns the
// FlowSchema and priority level the kube-apiserver classified it into,
// whatever the answer (a refusal is classified too).
func classify(ctx context.Context, as rest.ImpersonationConfig, method, path string) (string, string, error) {
	cfg := rest.CopyConfig(env.Upstream.Config)
	cfg.Impersonate = as
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", "", err
	}
	var body *strings.Reader
	if method == http.MethodPut {
		body = strings.NewReader(`{"kind":"DownstreamCopy","apiVersion":"courier.dev/v1alpha1","metadata":{"name":"app.edge.secret.db"}}`)
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(cfg.Host, "/")+path, body)
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	return resp.Header.Get(headerFlowSchemaUID), resp.Header.Get(headerPriorityLevelUID), nil
}
