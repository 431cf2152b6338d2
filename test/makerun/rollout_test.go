package makerun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/test/localenv/localup"
)

const (
	// source is the example HelmOp's Secret, dest where its copies land.
	source = "example-credentials"
	dest   = "example"
	// rotations is how many changes the test waits out.
	rotations = 20
)

// runPlugin runs the kubectl-courier binary as the upstream admin, stdout
// and stderr pipes (not a terminal), and returns its output and exit code.
func runPlugin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(plugin, append(args, "--kubeconfig", setup.Env.Upstream.Kubeconfig)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("kubectl-courier %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// change writes value as the example Secret's password upstream and
// returns once the write returned.
func change(t *testing.T, up kubernetes.Interface, value string) {
	t.Helper()
	s, err := up.CoreV1().Secrets(localup.Workspace).Get(context.Background(), source, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["password"] = []byte(value)
	if _, err := up.CoreV1().Secrets(localup.Workspace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// downstreams are clients of downstream-1 (pushed) and downstream-2
// (pulled), as the admin.
func downstreams(t *testing.T) []kubernetes.Interface {
	t.Helper()
	var out []kubernetes.Interface
	for _, d := range setup.Env.Downstreams {
		c, err := kubernetes.NewForConfig(d.Config)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// bothHold fails unless every downstream cluster's copy of the example
// Secret holds value now.
func bothHold(t *testing.T, clusters []kubernetes.Interface, value, when string) {
	t.Helper()
	for i, c := range clusters {
		s, err := c.CoreV1().Secrets(dest).Get(context.Background(), source, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: downstream-%d: %v", when, i+1, err)
		}
		if got := string(s.Data["password"]); got != value {
			t.Fatalf("%s: downstream-%d holds %q, not %q", when, i+1, got, value)
		}
	}
}

// TestRolloutStatusExample is make run's own check of `kubectl courier
// rollout status example` (docs/kubectl-courier.md): after each of 20
// changes of example-credentials upstream, the binary, started the moment
// the write returned, exits 0, and at that moment both downstream
// clusters, the pushed and the pulled one, hold the new value, so it never
// returned before they did. A last change waits through kubectl's plugin
// mechanism, whose output has no control character.
func TestRolloutStatusExample(t *testing.T) {
	up, err := kubernetes.NewForConfig(setup.Env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	clusters := downstreams(t)
	if len(clusters) != 2 {
		t.Fatalf("%d downstream clusters, want make run's 2", len(clusters))
	}
	if out, errOut, code := runPlugin(t, "rollout", "status", "example", "-n", localup.Workspace, "--timeout", "2m"); code != 0 {
		t.Fatalf("first rollout status: exit %d\n%s%s", code, out, errOut)
	}
	bothHold(t, clusters, "change-me", "first rollout status returned")

	var took []time.Duration
	for i := 1; i <= rotations; i++ {
		value := fmt.Sprintf("rotated-%d", i)
		change(t, up, value)
		began := time.Now()
		out, errOut, code := runPlugin(t, "rollout", "status", "example", "-n", localup.Workspace, "--timeout", "60s")
		took = append(took, time.Since(began).Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("change %d: exit %d\n%s%s", i, code, out, errOut)
		}
		bothHold(t, clusters, value, fmt.Sprintf("change %d: rollout status returned 0 after %v", i, took[i-1]))
		if i == 1 {
			t.Logf("kubectl-courier rollout status example (not a terminal):\n%s", out)
		}
	}
	t.Logf("%d changes: rollout status returned after %v", rotations, took)

	change(t, up, "rotated-last")
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), "courier", "rollout", "status", "example", "-n", localup.Workspace,
		"--timeout=60s", "--kubeconfig="+setup.Env.Upstream.Kubeconfig)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl courier rollout status example: %v\n%s", err, out)
	}
	bothHold(t, clusters, "rotated-last", "kubectl courier rollout status returned")
	want := `HelmOp "example": every copy synced at its source's current version (4 copies, 2 Clusters)`
	if !strings.Contains(string(out), want) || bytes.ContainsFunc(out, func(r rune) bool { return (r < 0x20 && r != '\n') || r == 0x7f }) {
		t.Errorf("kubectl courier rollout status example: want %q and no control character:\n%q", want, out)
	}
}
