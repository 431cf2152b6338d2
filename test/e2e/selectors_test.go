package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

func TestSelectors(t *testing.T) {
	w := newWorkspace(t, "ws-selectors", nil, nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "present"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: w.ns, DownstreamResources: resources("Secret/present", "Secret/absent", "ConfigMap/absent")}))
	at := "@" + w.ns + "="
	w.waitRows(metav1.ListOptions{},
		"c1/ConfigMap/absent"+at+"SourceMissing", "c1/Secret/absent"+at+"SourceMissing", "c1/Secret/present"+at+"Synced",
		"c2/ConfigMap/absent"+at+"SourceMissing", "c2/Secret/absent"+at+"SourceMissing", "c2/Secret/present"+at+"Synced")

	names := func(args ...string) string {
		out := kubectl(t, append([]string{"get", "dcp", "-n", w.ns, "-o", "name"}, args...)...)
		return strings.Join(strings.Fields(out), " ")
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"field selector cluster and phase", []string{"--field-selector", "spec.cluster=c1,status.phase=SourceMissing"},
			"downstreamcopy.courier.dev/app.c1.configmap.absent downstreamcopy.courier.dev/app.c1.secret.absent"},
		{"field selector source kind and name", []string{"--field-selector", "spec.source.kind=Secret,spec.source.name=present"},
			"downstreamcopy.courier.dev/app.c1.secret.present downstreamcopy.courier.dev/app.c2.secret.present"},
		{"field selector helmOp and phase inequality", []string{"--field-selector", "spec.helmOp=app,status.phase!=SourceMissing"},
			"downstreamcopy.courier.dev/app.c1.secret.present downstreamcopy.courier.dev/app.c2.secret.present"},
		{"label selector", []string{"-l", "courier.dev/cluster=c2,courier.dev/source-kind=configmap"},
			"downstreamcopy.courier.dev/app.c2.configmap.absent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(tc.args...); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("unsupported field selector is refused", func(t *testing.T) {
		_, err := env.Kubectl(context.Background(), env.Upstream, "get", "dcp", "-n", w.ns, "--field-selector", "spec.serviceAccount=x")
		if err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("expected a clear error for an unsupported field, got %v", err)
		}
	})
	t.Run("source created later is copied", func(t *testing.T) {
		w.t = t
		w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "absent"}, Data: map[string]string{"k": "v"}})
		w.waitRows(metav1.ListOptions{FieldSelector: "spec.source.kind=ConfigMap"},
			"c1/ConfigMap/absent"+at+"Synced", "c2/ConfigMap/absent"+at+"Synced")
	})
}

// TestKubectlWatch runs `kubectl get dcp -w` and checks that rows of a
// HelmOp added once the watch is open arrive as watch events, and that a
// row's change arrives too. kubectl prints its initial list before it
// watches: the row that list holds is the sign the watch is next, and the
// new HelmOp's rows cannot come from that list.
func TestKubectlWatch(t *testing.T) {
	w := newWorkspace(t, "ws-watch", nil)
	w.apply(selectAll("default"))
	w.apply(helmOp("first", fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/before")}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/before@default=SourceMissing")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), "--kubeconfig", env.Upstream.Kubeconfig, "get", "dcp", "-n", w.ns, "-w", "--no-headers")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	waitLine := func(what string, match func(string) bool) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl get -w ended before %s", what)
				}
				if match(l) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no line for %s within 60s in kubectl get -w", what)
			}
		}
	}
	waitLine("the initial list", func(l string) bool { return strings.HasPrefix(l, "first.c1.secret.before ") })
	w.apply(helmOp("watched", fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/s")}))
	waitLine("the new HelmOp's row", func(l string) bool {
		return strings.HasPrefix(l, "watched.c1.secret.s ") && strings.Contains(l, "SourceMissing")
	})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	waitLine("the row's change", func(l string) bool {
		return strings.HasPrefix(l, "watched.c1.secret.s ") && strings.Contains(l, "Synced")
	})
}
