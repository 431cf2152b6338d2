package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/localenv"
)

// pluginRepeats is how many timed runs each plugin command gets (after
// one untimed run); the table prints their median, min and max.
const pluginRepeats = 5

// pluginStatusResult is one `kubectl courier` command's runs.
type pluginStatusResult struct {
	n            int
	command      string
	times        []time.Duration
	lines, bytes int
}

func (r *report) addPluginStatus(res ...pluginStatusResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pluginStatus = append(r.pluginStatus, res...)
}

// printPluginStatus writes the plugin's rows: no target, figures for
// docs/benchmarks.md.
func printPluginStatus(w io.Writer, rows []pluginStatusResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kubectl courier (binary, through the aggregator)\tN\truns\tmedian\tmin\tmax\toutput lines\toutput bytes")
	for _, r := range rows {
		sorted := slices.Clone(r.times)
		slices.Sort(sorted)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%d\t%d\n", r.command, r.n, len(sorted), ms(sorted[len(sorted)/2]), ms(sorted[0]),
			ms(sorted[len(sorted)-1]), r.lines, r.bytes)
	}
	tw.Flush()
}

// testPluginStatus times `kubectl courier status` at n simulated Clusters
// x 10 sources as a user runs it: the kubectl-courier binary built from
// this checkout, with the upstream admin's kubeconfig, through the
// upstream's aggregator, its output a pipe. It runs on the scale case's
// HelmOp when that case ran before it at n (its last N keeps its
// Clusters), else it makes the same setup first: n Clusters whose
// kubeconfigs reach the two downstream clusters alternately, 10 Secrets,
// the HelmOp "scale" with one target per Cluster, every copy Synced.
// Commands: every owner (`status -A`, one list of summaries), one owner
// (`status scale`: a GET of its summary and a list of its n x 10 rows),
// and the same with every Cluster drawn (`--all`).
func testPluginStatus(t *testing.T, n int) {
	ctx := context.Background()
	l := layout{n}
	fc, err := versioned.NewForConfig(fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fc.FleetV1alpha1().HelmOps(l.workspace()).Get(ctx, helmOpName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		pluginStatusSetup(t, fc, l)
	} else if err != nil {
		t.Fatal(err)
	}
	waitSynced(t, fc, l.workspace(), n*sourcesPerOp, l.budget())
	waitIdle(t, courier.Pid(), l.budget())

	plugin := filepath.Join(t.TempDir(), "kubectl-courier")
	root, err := localenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-courier")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-courier: %v: %s", err, out)
	}
	var res []pluginStatusResult
	for _, args := range [][]string{{"status", "-A"}, {"status", helmOpName, "-n", l.workspace()}, {"status", helmOpName, "-n", l.workspace(), "--all"}} {
		r := pluginStatusResult{n: n, command: "kubectl courier " + strings.Join(args, " ")}
		var out string
		for i := -1; i < pluginRepeats; i++ { // i = -1: untimed, the page cache warm
			var took time.Duration
			out, took = runPlugin(t, plugin, args)
			if i >= 0 {
				r.times = append(r.times, took)
			}
		}
		r.lines, r.bytes = strings.Count(out, "\n"), len(out)
		t.Logf("%s (%d lines, %d bytes), first lines:\n%s", r.command, r.lines, r.bytes, head(out, 12))
		if args[1] == "-A" {
			// The figures are of the real thing: the owner is listed, every
			// Cluster ready and every copy synced.
			checkOwnerLine(t, l, out)
		}
		res = append(res, r)
	}
	results.addPluginStatus(res...)
}

// runPlugin runs the binary with args as the upstream admin, its output a
// pipe, and returns its output and how long it ran.
func runPlugin(t *testing.T, plugin string, args []string) (string, time.Duration) {
	t.Helper()
	cmd := exec.Command(plugin, append(args, "--kubeconfig", env.Upstream.Kubeconfig)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl-courier %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), time.Since(began)
}

// checkOwnerLine fails unless the output of `status -A` has the HelmOp's
// line with every Cluster ready and every copy synced.
func checkOwnerLine(t *testing.T, l layout, out string) {
	t.Helper()
	want := fmt.Sprintf("%s %s %d/%d %d/%d 0 Ready", l.workspace(), helmOpName, l.n, l.n, l.n*sourcesPerOp, l.n*sourcesPerOp)
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == want {
			return
		}
	}
	t.Errorf("status -A has no line %q:\n%s", want, out)
}

// head is s's first n lines.
func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// pluginStatusSetup makes the scale case's Courier side alone: n Clusters
// with kubeconfig Secrets, 10 Secrets, the HelmOp with one target per
// Cluster into its own namespace; testPluginStatus then waits for every
// copy.
func pluginStatusSetup(t *testing.T, fc versioned.Interface, l layout) {
	ctx := context.Background()
	up := fastUpstream(t)
	if _, err := up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.workspace()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	createClusters(t, ctx, up, fc, l)
	payload := bytes.Repeat([]byte("x"), defaultSourceBytes)
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: helmOpName}}
	for _, name := range allSources() {
		if _, err := up.CoreV1().Secrets(l.workspace()).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: sideCourier}},
			Data: map[string][]byte{roundKey: []byte("r0"), "payload": payload}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		op.Spec.DownstreamResources = append(op.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "Secret", Name: name})
	}
	for i := 1; i <= l.n; i++ {
		target := fleet.BundleTarget{ClusterName: clusterName(i)}
		target.TargetNamespace = l.courierDest(i)
		op.Spec.Targets = append(op.Spec.Targets, target)
	}
	if _, err := fc.FleetV1alpha1().HelmOps(l.workspace()).Create(ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, fc, l.workspace(), l.n*sourcesPerOp, l.budget())
	results.note("N=%d kubectl courier: %d Clusters, 10 sources and the HelmOp made, every copy Synced, in %s",
		l.n, l.n, time.Since(began).Round(time.Second))
}
