package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/courier-dev/courier/test/localenv"
)

// agentChartDir is courier-agent's chart, relative to repoRoot.
const agentChartDir = "artifacts/agent-chart"

// agentChartValues are what every install sets: the Cluster and the
// upstream kubeconfig's Secret.
var agentChartValues = []string{"--set", "cluster=fleet-default/edge", "--set", "upstream.existingSecret=courier-agent-upstream"}

// TestPullInstallChart lints the agent's chart and checks it refuses what
// would not run.
func TestPullInstallChart(t *testing.T) {
	for name, values := range map[string][]string{
		"existing secret":      agentChartValues,
		"inline kubeconfig":    {"--set", "cluster=fleet-default/edge", "--set", "upstream.kubeconfig=apiVersion: v1"},
		"require SA, 2 copies": append(slices.Clone(agentChartValues), "--set", "requireServiceAccount=true", "--set", "replicas=2"),
	} {
		t.Run(name, func(t *testing.T) {
			out := helm(t, append([]string{"lint", "--strict", agentChartDir}, values...)...)
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint:\n%s", out)
			}
		})
	}
	for name, c := range map[string]struct {
		values []string
		want   string
	}{
		"no cluster":                       {[]string{"--set", "upstream.existingSecret=x"}, "set cluster"},
		"no upstream":                      {[]string{"--set", "cluster=fleet-default/edge"}, "upstream.existingSecret"},
		"replicas without leader election": {append(slices.Clone(agentChartValues), "--set", "replicas=2", "--set", "leaderElection.enabled=false"), "leaderElection.enabled"},
	} {
		t.Run(name+" is refused", func(t *testing.T) {
			out, err := helmErr(t, append([]string{"template", "courier-agent", agentChartDir, "-n", localenv.AgentNamespace}, c.values...)...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("want an error naming %s, got err=%v:\n%s", c.want, err, out)
			}
		})
	}
}

// TestPullInstallAppliesServerSide has a real downstream kube-apiserver
// validate the agent's plain manifests and its rendered chart (schema,
// admission, RBAC escalation checks).
func TestPullInstallAppliesServerSide(t *testing.T) {
	ctx := context.Background()
	d := env.Downstreams[0]
	if _, err := env.Kubectl(ctx, d, "apply", "-f", filepath.Join(repoRoot, "artifacts", "agent", "namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Run("manifests", func(t *testing.T) {
		out, err := env.Kubectl(ctx, d, "apply", "--dry-run=server", "-f", filepath.Join(repoRoot, "artifacts", "agent"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"deployment.apps/courier-agent", "clusterrole.rbac.authorization.k8s.io/courier-agent",
			"role.rbac.authorization.k8s.io/courier-agent", "serviceaccount/courier-agent"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server output lacks %s:\n%s", want, out)
			}
		}
	})
	t.Run("chart", func(t *testing.T) {
		rendered := helm(t, append([]string{"template", "courier-agent", agentChartDir, "-n", localenv.AgentNamespace}, agentChartValues...)...)
		dir, err := os.MkdirTemp("", "courier-agent-install-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		f := filepath.Join(dir, "rendered.yaml")
		if err := os.WriteFile(f, []byte(rendered), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := env.Kubectl(ctx, d, "apply", "--dry-run=server", "-f", f)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"deployment.apps/courier-agent", "role.rbac.authorization.k8s.io/courier-agent:leader-election"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server output lacks %s:\n%s", want, out)
			}
		}
	})
}

// TestPullInstallFlagsKnown checks that every flag the agent's Deployments
// (manifest and chart) pass is one the courier-agent binary accepts.
func TestPullInstallFlagsKnown(t *testing.T) {
	help, err := exec.Command(agentBin(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("courier-agent --help: %v\n%s", err, help)
	}
	plain, err := os.ReadFile(filepath.Join(repoRoot, "artifacts", "agent", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chart := helm(t, append([]string{"template", "courier-agent", agentChartDir, "-n", localenv.AgentNamespace,
		"--set", "upstreamID=x", "--set", "requireServiceAccount=true", "--set", "extraArgs[0]=--v=3"}, agentChartValues...)...)
	for name, manifests := range map[string]string{"manifest": string(plain), "chart": chart} {
		cs, _, _ := unstructured.NestedSlice(find(t, decodeAll(t, manifests), "Deployment", "courier-agent").Object, "spec", "template", "spec", "containers")
		argv, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		var unknown []string
		for _, a := range argv {
			flag, _, _ := strings.Cut(a, "=")
			if !strings.Contains(string(help), "      "+flag+" ") && !strings.Contains(string(help), ", "+flag+" ") {
				unknown = append(unknown, flag)
			}
		}
		if len(unknown) > 0 {
			t.Errorf("the %s's Deployment passes %v, which courier-agent does not accept", name, unknown)
		}
		// Positive control: the flags it cannot run without are among those
		// checked.
		for _, flag := range []string{"--cluster", "--upstream-kubeconfig", "--leader-elect"} {
			if !slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, flag+"=") }) {
				t.Errorf("the %s's Deployment does not pass %s: %v", name, flag, argv)
			}
		}
	}
}
