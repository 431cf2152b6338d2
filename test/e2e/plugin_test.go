package e2e

// kubectl courier (cmd/kubectl-courier) against the real servers: status
// during a rotation, rollout status returning on Ready (never before both
// Clusters hold the new value) and failing on a Conflict, why naming the
// fix, the report, and the bad input of docs/kubectl-courier.md.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cli"
	"github.com/courier-dev/courier/pkg/troubleshoot"
)

// courierCLI runs the plugin's command line in-process (the code of the
// binary, started the moment the call is made) as the upstream admin.
func courierCLI(kubeconfig string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = cli.Main(context.Background(), append(args, "--kubeconfig", kubeconfig), cli.Streams{Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), code
}

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// kubectlCourier runs `kubectl courier ARGS` with the real kubectl, which
// finds the plugin binary (built once from this checkout) on PATH.
func kubectlCourier(t *testing.T, args ...string) (string, error) {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "kubectl-courier-")
		if pluginErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-courier"), "./cmd/kubectl-courier")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("building kubectl-courier: %v: %s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	// kubectl takes no flag before a plugin's name: the plugin reads them.
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), append(append([]string{"courier"}, args...), "--kubeconfig="+env.Upstream.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl courier %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), err
}

// pluginWorkspace is a workspace with Clusters c1 (downstream-1) and c2
// (downstream-2), the Secret creds and the HelmOp app copying it to dest.
func pluginWorkspace(t *testing.T, name, dest string) *workspace {
	w := newWorkspace(t, name, nil, nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "v0"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/creds")}))
	return w
}

// rotate writes a new value to creds and returns when the write returned.
func (w *workspace) rotate(t *testing.T, value string) {
	t.Helper()
	if _, err := w.c.kube.CoreV1().Secrets(w.ns).Update(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: w.ns},
		StringData: map[string]string{"password": value}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bothHold fails unless both downstream copies of creds hold value now.
func bothHold(t *testing.T, dest, value, when string) {
	t.Helper()
	for d := range env.Downstreams {
		s, err := downstream(t, d).CoreV1().Secrets(dest).Get(context.Background(), "creds", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: downstream-%d: %v", when, d+1, err)
		}
		if got := string(s.Data["password"]); got != value {
			t.Fatalf("%s: downstream-%d holds %q, not %q", when, d+1, got, value)
		}
	}
}

// TestPluginRolloutStatus: rollout status returns 0 once both Clusters
// hold the new value and never before, 20 times, each started in-process
// the moment the source write returned; then the binary through kubectl.
// It guards the summary's floored read: a binary needs 100 ms or more to
// start, which gives the view time to catch up, so make run's own check
// (test/makerun, with the binary) passes without the floor, while this
// one, with no start-up in between, fails at its second rotation.
func TestPluginRolloutStatus(t *testing.T) {
	const dest = "plugin-rollout"
	w := pluginWorkspace(t, "ws-plugin-rollout", dest)
	kc := env.Upstream.Kubeconfig
	w.waitSummary("app", "both copies counted", func(s *v1alpha1.DownstreamCopySummary) bool { return s.Status.Copies == 2 })
	if out, errOut, code := courierCLI(kc, "rollout", "status", "app", "-n", w.ns, "--timeout", "60s"); code != 0 {
		t.Fatalf("first rollout status: exit %d\n%s%s", code, out, errOut)
	}
	bothHold(t, dest, "v0", "first rollout status returned")

	var took []time.Duration
	for i := 1; i <= 20; i++ {
		value := fmt.Sprintf("v%d", i)
		w.rotate(t, value)
		began := time.Now()
		out, errOut, code := courierCLI(kc, "rollout", "status", "app", "-n", w.ns, "--timeout", "60s")
		took = append(took, time.Since(began).Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("rotation %d: exit %d\n%s%s", i, code, out, errOut)
		}
		bothHold(t, dest, value, fmt.Sprintf("rotation %d: rollout status returned 0", i))
		if i == 1 {
			t.Logf("kubectl courier rollout status app (not a terminal):\n%s", out)
		}
	}
	t.Logf("20 rotations: rollout status returned after %v", took)

	w.rotate(t, "v21")
	out, err := kubectlCourier(t, "rollout", "status", "app", "-n", w.ns, "--timeout=60s")
	if err != nil {
		t.Fatal(err)
	}
	bothHold(t, dest, "v21", "kubectl courier rollout status returned")
	if !strings.Contains(out, `HelmOp "app": every copy synced at its source's current version (2 copies, 2 Clusters)`) || len(controlChars(out)) > 0 {
		t.Errorf("kubectl courier rollout status:\n%q", out)
	}
}

// TestPluginStatusDuringRotation: status read right after a source write
// never shows the owner Ready at the old version: it is not Ready, or
// Ready at the new resourceVersion; and once done, both the owner list
// and the matrix say Ready, through kubectl's plugin mechanism too.
func TestPluginStatusDuringRotation(t *testing.T) {
	const dest = "plugin-status"
	w := pluginWorkspace(t, "ws-plugin-status", dest)
	kc := env.Upstream.Kubeconfig
	w.waitSummary("app", "Ready", func(s *v1alpha1.DownstreamCopySummary) bool { return readyOf(s).Status == metav1.ConditionTrue })
	rvLine := regexp.MustCompile(`Secret/creds rv (\d+)`)
	notReadySeen := 0
	for i := 1; i <= 5; i++ {
		w.rotate(t, fmt.Sprintf("s%d", i))
		src, err := w.c.kube.CoreV1().Secrets(w.ns).Get(context.Background(), "creds", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code := courierCLI(kc, "status", "app", "-n", w.ns)
		if code != 0 {
			t.Fatalf("status: exit %d: %s", code, errOut)
		}
		head := strings.SplitN(out, "\n", 2)[0]
		m := rvLine.FindStringSubmatch(out)
		switch {
		case strings.Contains(head, ": Ready"):
			if m == nil || m[1] != src.ResourceVersion {
				t.Fatalf("rotation %d: status says Ready but not at the source's resourceVersion %s:\n%s", i, src.ResourceVersion, out)
			}
		case strings.Contains(head, "Not ready"):
			notReadySeen++
		default:
			t.Fatalf("rotation %d: status header %q", i, head)
		}
		if !strings.Contains(out, "c1 ") || !strings.Contains(out, "c2 ") || !strings.Contains(out, "Legend:") {
			t.Errorf("rotation %d: matrix lacks a Cluster or the legend:\n%s", i, out)
		}
		if i == 1 {
			t.Logf("kubectl courier status app right after a write:\n%s", out)
		}
		if _, errOut, code := courierCLI(kc, "rollout", "status", "app", "-n", w.ns, "--timeout", "60s"); code != 0 {
			t.Fatalf("rotation %d: rollout status: %s", i, errOut)
		}
	}
	t.Logf("status right after 5 writes: not Ready %d times, else Ready at the new version", notReadySeen)

	out, err := kubectlCourier(t, "status", "-n", w.ns)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "app 2/2 2/2 0 Ready" {
		t.Errorf("kubectl courier status:\n%s", out)
	}
	t.Logf("kubectl courier status -n %s:\n%s", w.ns, out)
	out, err = kubectlCourier(t, "status", "app", "-n", w.ns)
	if err != nil || !strings.Contains(out, `HelmOp "app" in ws-plugin-status: Ready (Synced)`) || len(controlChars(out)) > 0 {
		t.Errorf("kubectl courier status app (%v):\n%q", err, out)
	}
	t.Logf("kubectl courier status app -n %s:\n%s", w.ns, out)
}

// TestPluginConflict: a Conflict in one Cluster: rollout status fails
// after --fail-after naming the row, why names the fix from the
// troubleshooting table, status groups it, the report draws it.
func TestPluginConflict(t *testing.T) {
	const dest = "plugin-conflict"
	ctx := context.Background()
	d := downstream(t, 1)
	if _, err := d.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := d.CoreV1().Secrets(dest).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: dest},
		StringData: map[string]string{"password": "theirs"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	w := pluginWorkspace(t, "ws-plugin-conflict", dest)
	kc := env.Upstream.Kubeconfig
	w.waitSummary("app", "a Conflict", func(s *v1alpha1.DownstreamCopySummary) bool {
		return s.Status.Phases["Conflict"] == 1 && s.Status.SyncedCopies == 1
	})

	began := time.Now()
	out, errOut, code := courierCLI(kc, "rollout", "status", "app", "-n", w.ns, "--timeout", "60s", "--fail-after", "3s")
	if code != 1 || time.Since(began) < 3*time.Second || !strings.Contains(errOut, "has copies failing for 3s or longer") ||
		!strings.Contains(errOut, "Conflict app.c2.secret.creds: Cluster c2, Secret/creds") {
		t.Errorf("rollout status on a Conflict: exit %d after %v\nstdout:\n%s\nstderr:\n%s", code, time.Since(began), out, errOut)
	}
	t.Logf("kubectl courier rollout status app --fail-after 3s:\n%s%s", out, errOut)
	// A positive control of the failure: with a timeout shorter than
	// --fail-after, the same wait ends on the timeout instead.
	if _, errOut, code := courierCLI(kc, "rollout", "status", "app", "-n", w.ns, "--timeout", "2s", "--fail-after", "1m"); code != 1 ||
		!strings.Contains(errOut, "timed out after 2s") || !strings.Contains(errOut, "Conflict app.c2.secret.creds") {
		t.Errorf("rollout status timing out: exit %d: %s", code, errOut)
	}

	out, errOut, code = courierCLI(kc, "why", "app", "c2", "Secret/creds", "-n", w.ns)
	if code != 0 {
		t.Fatalf("why: exit %d: %s", code, errOut)
	}
	row, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).Get(ctx, "app.c2.secret.creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, entry := troubleshoot.Lookup("Conflict", row.Status.Message)
	if entry == nil {
		t.Fatalf("the table has no entry for %q", row.Status.Message)
	}
	for _, want := range []string{"Phase:        Conflict", "What to do:   " + troubleshoot.Plain(entry.Fix), "Message:      " + row.Status.Message,
		"Delivered by: ", "Reachability: reached", "docs/troubleshooting.md#conflict"} {
		if !strings.Contains(out, want) {
			t.Errorf("why lacks %q:\n%s", want, out)
		}
	}
	t.Logf("kubectl courier why app c2 Secret/creds:\n%s", out)
	if byName, _, code := courierCLI(kc, "why", "app.c2.secret.creds", "-n", w.ns); code != 0 || !strings.Contains(byName, "What to do:   "+troubleshoot.Plain(entry.Fix)) {
		t.Errorf("why by row name: exit %d:\n%s", code, byName)
	}

	out, _, code = courierCLI(kc, "status", "app", "-n", w.ns, "--width", "40")
	if code != 0 || !strings.Contains(out, "Conflict Cluster c2, Secret/creds") || !strings.Contains(out, "c1 .") || !strings.Contains(out, "c2 C") {
		t.Errorf("status with a Conflict: exit %d:\n%s", code, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 40 && strings.Contains(strings.TrimSpace(l), " ") {
			t.Errorf("status --width 40: line of %d columns: %q", len(l), l)
		}
	}
	t.Logf("kubectl courier status app --width 40:\n%s", out)

	all, _, code := courierCLI(kc, "status", "-A")
	if code != 0 || !strings.Contains(all, "ws-plugin-conflict  app") {
		t.Errorf("status -A: exit %d:\n%s", code, all)
	}
	t.Logf("kubectl courier status -A:\n%s", all)

	page, _, code := courierCLI(kc, "report", "-o", "html", "-n", w.ns)
	if code != 0 || strings.Count(page, "<td class=") != 2 || !strings.Contains(page, "app.c2.secret.creds: ") {
		t.Errorf("report: exit %d, %d cells", code, strings.Count(page, "<td class="))
	}
}

// TestPluginBadInput: an owner that does not exist, a cluster without
// Courier's API, a user without rights, a negative --timeout.
func TestPluginBadInput(t *testing.T) {
	w := newWorkspace(t, "ws-plugin-bad")
	kc := env.Upstream.Kubeconfig
	for _, tc := range []struct {
		name       string
		kubeconfig string
		args       []string
		want       string
	}{
		{"owner not found (status)", kc, []string{"status", "nope", "-n", w.ns}, `HelmOp "nope" has no copies in namespace ws-plugin-bad`},
		{"owner not found (rollout)", kc, []string{"rollout", "status", "nope", "-n", w.ns}, `HelmOp "nope" has no copies in namespace ws-plugin-bad`},
		{"row not found", kc, []string{"why", "nope", "-n", w.ns}, `no downstreamcopy "nope" in namespace ws-plugin-bad`},
		{"negative timeout", kc, []string{"rollout", "status", "nope", "-n", w.ns, "--timeout", "-1s"}, "--timeout must not be negative"},
		{"no Courier API", env.Downstreams[0].Kubeconfig, []string{"status", "-n", "default"}, "no APIService v1alpha1.courier.dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := courierCLI(tc.kubeconfig, tc.args...)
			if code != 1 || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, tc.want)
			}
		})
	}
	t.Run("no rights", func(t *testing.T) {
		nobody, _, err := env.UserKubeconfig(env.Upstream, "plugin-nobody")
		if err != nil {
			t.Fatal(err)
		}
		// Positive control: the same user is authenticated (it gets a 403,
		// not a 401).
		out, errOut, code := courierCLI(nobody, "status", "-n", w.ns)
		if code != 1 || !strings.Contains(errOut, `forbidden: you may not list downstreamcopysummaries.courier.dev in namespace "ws-plugin-bad"`) ||
			!strings.Contains(errOut, `"plugin-nobody"`) || out != "" {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

// controlChars returns the control characters of s other than newline.
func controlChars(s string) []rune {
	var out []rune
	for _, r := range s {
		if (r < 0x20 && r != '\n') || r == 0x7f {
			out = append(out, r)
		}
	}
	return out
}
