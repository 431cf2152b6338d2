package e2e

// downstreamcopysummaries (docs/design.md#summaries): one line per owner, a
// Ready condition kubectl wait can wait on, and no early return after a
// source change.

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// summaryOf reads the workspace's summary name through the aggregator.
func (w *workspace) summaryOf(ctx context.Context, name string) (*v1alpha1.DownstreamCopySummary, error) {
	return w.c.courier.CourierV1alpha1().DownstreamCopySummaries(w.ns).Get(ctx, name, metav1.GetOptions{})
}

func readyOf(s *v1alpha1.DownstreamCopySummary) metav1.Condition {
	for _, c := range s.Status.Conditions {
		if c.Type == "Ready" {
			return c
		}
	}
	return metav1.Condition{}
}

// waitSummary waits until the summary satisfies cond.
func (w *workspace) waitSummary(name, what string, cond func(*v1alpha1.DownstreamCopySummary) bool) *v1alpha1.DownstreamCopySummary {
	w.t.Helper()
	var last *v1alpha1.DownstreamCopySummary
	eventually(w.t, "summary "+name+": "+what, func() (bool, string) {
		s, err := w.summaryOf(context.Background(), name)
		if err != nil {
			return false, err.Error()
		}
		last = s
		return cond(s), fmt.Sprintf("%+v\nrows:\n%s", s.Status, w.messages())
	})
	return last
}

// kubectlGetDCS returns the data lines of `kubectl get dcs` in the
// workspace, checking the header.
func (w *workspace) kubectlGetDCS() []string {
	w.t.Helper()
	out := kubectl(w.t, "get", "dcs", "-n", w.ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if h := strings.Join(strings.Fields(lines[0]), " "); h != "NAME OWNER CLUSTERS-READY COPIES-SYNCED FAILING STATUS AGE" {
		w.t.Fatalf("kubectl get dcs header %q:\n%s", h, out)
	}
	return lines[1:]
}

// summaryCanary is a Secret value that must appear in no summary.
const summaryCanary = "summary-canary-5f1e"

// TestSummaryFailingThenReady: three Clusters, the HelmOp's ServiceAccount
// may write in the destination namespace of two; the summary counts one
// failing copy and names the third Cluster, and turns Ready once the
// ServiceAccount is granted its rights there.
func TestSummaryFailingThenReady(t *testing.T) {
	const sa = "summary-writer"
	serviceAccountIn(t, 0, sa, "sum-a", "sum-c")
	serviceAccountIn(t, 1, sa, "sum-a")
	rw := []string{"get", "create", "update"}
	grant(t, 0, sa, "sum-a", []string{"secrets"}, rw)
	grant(t, 1, sa, "sum-a", []string{"secrets"}, rw)
	// c1 and c3 reach downstream-1, c2 downstream-2; c3 copies into sum-c.
	w := newWorkspace(t, "ws-summary", nil, nil, nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"k": summaryCanary}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: "sum-a", ServiceAccount: sa, DownstreamResources: resources("Secret/creds")},
		fleet.BundleTarget{ClusterName: "c3", BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "sum-c"}},
		fleet.BundleTarget{ClusterGroup: "default"}))

	s := w.waitSummary("app", "1 failing of 3", func(s *v1alpha1.DownstreamCopySummary) bool {
		return s.Status.Failing == 1 && s.Status.Clusters == 3 && s.Status.ReadyClusters == 2 && s.Status.SyncedCopies == 2
	})
	if !strings.HasPrefix(s.Status.Message, "Forbidden(1) [Cluster ws-summary/c3: ") || readyOf(s).Status != metav1.ConditionFalse ||
		len(s.Status.NonReady) != 1 || s.Status.NonReady[0].Cluster != "c3" || s.Spec.Owner.Kind != "HelmOp" || s.Spec.Owner.Name != "app" {
		t.Errorf("summary: %+v", s.Status)
	}
	t.Run("kubectl get dcs while failing", func(t *testing.T) {
		w.t = t
		lines := w.kubectlGetDCS()
		if len(lines) != 1 || strings.Join(strings.Fields(lines[0])[:5], " ") != "app HelmOp/app 2/3 2/3 1" ||
			!strings.Contains(lines[0], "Forbidden(1) [Cluster ws-summary/c3: ") {
			t.Errorf("kubectl get dcs: %q", lines)
		}
	})
	t.Run("granted: Ready", func(t *testing.T) {
		w.t = t
		grant(t, 0, sa, "sum-c", []string{"secrets"}, rw)
		w.waitSummary("app", "Ready", func(s *v1alpha1.DownstreamCopySummary) bool { return readyOf(s).Status == metav1.ConditionTrue })
		waitSecret(t, 0, "sum-c", "creds", 10*time.Second, "copied to c3", secretData("k", summaryCanary))
		lines := w.kubectlGetDCS()
		if len(lines) != 1 || strings.Join(strings.Fields(lines[0])[:6], " ") != "app HelmOp/app 3/3 3/3 0 Ready" {
			t.Errorf("kubectl get dcs: %q", lines)
		}
		out := kubectl(t, "get", "dcs", "app", "-n", w.ns, "-o", "yaml")
		if strings.Contains(out, summaryCanary) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(summaryCanary))) || !strings.Contains(out, "reason: Synced") {
			t.Errorf("summary as YAML:\n%s", out)
		}
	})
}

// TestSummaryWaitAfterRotation is the rotation workflow, 20 times: the
// moment `kubectl apply` of a changed Secret returns, `kubectl wait
// --for=condition=Ready dcs/app` starts; the moment it returns, both
// downstream copies must already hold the new value. The view itself
// (a list not pinned to the name, so not floored) is read right after the
// wait starts, to count how often it still showed the old state as Ready.
func TestSummaryWaitAfterRotation(t *testing.T) {
	const dest = "rotate-dest"
	w := newWorkspace(t, "ws-rotate", nil, nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "v0"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/creds")}))
	// kubectl wait fails at once on a summary that does not exist yet.
	w.waitSummary("app", "both copies counted", func(s *v1alpha1.DownstreamCopySummary) bool { return s.Status.Copies == 2 })
	kubectl(t, "wait", "--for=condition=Ready", "dcs/app", "-n", w.ns, "--timeout=60s")

	ctx := context.Background()
	manifest := filepath.Join(t.TempDir(), "creds.yaml")
	staleReady := 0
	var waits []time.Duration
	for i := 1; i <= 20; i++ {
		value := fmt.Sprintf("v%d", i)
		yaml := kubectl(t, "create", "secret", "generic", "creds", "-n", w.ns, "--from-literal=password="+value, "--dry-run=client", "-o", "yaml")
		if err := os.WriteFile(manifest, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		kubectl(t, "apply", "-f", manifest)
		began := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := env.Kubectl(ctx, env.Upstream, "wait", "--for=condition=Ready", "dcs/app", "-n", w.ns, "--timeout=60s")
			done <- err
		}()
		if list, err := w.c.courier.CourierV1alpha1().DownstreamCopySummaries(w.ns).List(ctx, metav1.ListOptions{}); err == nil &&
			len(list.Items) == 1 && readyOf(&list.Items[0]).Status == metav1.ConditionTrue {
			staleReady++
		}
		if err := <-done; err != nil {
			t.Fatalf("rotation %d: kubectl wait: %v", i, err)
		}
		waits = append(waits, time.Since(began))
		for d := range env.Downstreams {
			c, err := downstream(t, d).CoreV1().Secrets(dest).Get(ctx, "creds", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("rotation %d: downstream-%d: %v", i, d+1, err)
			}
			if got := string(c.Data["password"]); got != value {
				t.Fatalf("rotation %d: kubectl wait returned while downstream-%d still had the old value (%s), not %s", i, d+1, got, value)
			}
		}
	}
	t.Logf("20 rotations: kubectl wait returned after %v; the unfloored view still said Ready right after the write %d times", waits, staleReady)

	// kubectl takes a hundred milliseconds or more to start, time enough
	// for the view to catch up most of the time. The same list-then-watch
	// by name, sent in-process the moment the write returns, meets the
	// view before it has seen the write.
	t.Run("the same wait in-process, right after the write", func(t *testing.T) {
		// A wait whose first read already said Ready met nothing to wait
		// for: the test proves the floor only if some did not.
		notReadyFirst := 0
		for i := 21; i <= 40; i++ {
			value := fmt.Sprintf("v%d", i)
			w.t = t
			if _, err := w.c.kube.CoreV1().Secrets(w.ns).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: w.ns},
				StringData: map[string]string{"password": value}}, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			readyFirst, err := waitReadyByName(ctx, w, "app", time.Minute)
			if err != nil {
				t.Fatalf("rotation %d: %v", i, err)
			}
			if !readyFirst {
				notReadyFirst++
			}
			for d := range env.Downstreams {
				c, err := downstream(t, d).CoreV1().Secrets(dest).Get(ctx, "creds", metav1.GetOptions{})
				if err != nil {
					t.Fatalf("rotation %d: downstream-%d: %v", i, d+1, err)
				}
				if got := string(c.Data["password"]); got != value {
					t.Fatalf("rotation %d: the wait returned while downstream-%d still had the old value (%s), not %s", i, d+1, got, value)
				}
			}
		}
		t.Logf("20 in-process waits: %d began on a summary not yet Ready", notReadyFirst)
		if notReadyFirst == 0 {
			t.Error("every wait's first read was already Ready: none met the race the floor guards")
		}
	})
}

// waitReadyByName does what `kubectl wait --for=condition=Ready dcs/<name>`
// does: a list pinned to the name, then, unless that shows Ready=True, a
// watch pinned to the name from the list's resourceVersion until an event
// does. readyFirst reports whether the list already showed it.
func waitReadyByName(ctx context.Context, w *workspace, name string, timeout time.Duration) (readyFirst bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	summaries := w.c.courier.CourierV1alpha1().DownstreamCopySummaries(w.ns)
	byName := "metadata.name=" + name
	list, err := summaries.List(ctx, metav1.ListOptions{FieldSelector: byName})
	if err != nil {
		return false, err
	}
	if len(list.Items) == 1 && readyOf(&list.Items[0]).Status == metav1.ConditionTrue {
		return true, nil
	}
	watcher, err := summaries.Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return false, err
	}
	defer watcher.Stop()
	for ev := range watcher.ResultChan() {
		if s, ok := ev.Object.(*v1alpha1.DownstreamCopySummary); ok && readyOf(s).Status == metav1.ConditionTrue {
			return false, nil
		}
	}
	return false, fmt.Errorf("no Ready=True within %s", timeout)
}

// summaryWindow is courier-apiserver's default --summary-window.
const summaryWindow = 250 * time.Millisecond

// summaryBurst changes the Secret "shared" that every one of the n rows of
// HelmOp op lists, and counts the events a watcher of op's summary
// receives: at most 1 + ceil(D/window), D being the time from the first
// event to the last (the summary is recomputed at most once per window),
// and the last one shows all n copies at the Secret's new version.
func summaryBurst(t *testing.T, w *workspace, op string, n int32) {
	ctx := context.Background()
	summaries := w.c.courier.CourierV1alpha1().DownstreamCopySummaries(w.ns)
	w.t = t
	w.waitSummary(op, fmt.Sprintf("%d copies", n), func(s *v1alpha1.DownstreamCopySummary) bool { return s.Status.Copies == n })
	list, err := summaries.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	watcher, err := summaries.Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, StringData: map[string]string{"k": "summary-burst"}})
	src, err := w.c.kube.CoreV1().Secrets(w.ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var first, lastAt time.Time
	var last *v1alpha1.DownstreamCopySummary
	events := 0
	for {
		wait := 10 * summaryWindow // quiet: no more events expected
		if last == nil || last.Status.Sources[0].ResourceVersion != src.ResourceVersion {
			wait = 2 * time.Minute // not caught up yet
		}
		quiet := time.After(wait)
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatalf("the watch closed after %d events", events)
			}
			s, isSummary := ev.Object.(*v1alpha1.DownstreamCopySummary)
			if !isSummary || s.Name != op {
				continue
			}
			if events == 0 {
				first = time.Now()
			}
			events++
			last, lastAt = s, time.Now()
		case <-quiet:
			span := lastAt.Sub(first)
			bound := 1 + int((span+summaryWindow-1)/summaryWindow)
			t.Logf("%d events of summary %s for %d rows changing at once, over %s (bound %d)", events, op, n, span, bound)
			if events > bound {
				t.Errorf("%d events over %s: more than 1 + ceil(D/window) = %d", events, span, bound)
			}
			if last == nil || last.Status.Copies != n || last.Status.Sources[0].ResourceVersion != src.ResourceVersion {
				t.Errorf("last event: %+v", last)
			}
			return
		}
	}
}
