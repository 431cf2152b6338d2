package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// TestShutdownDuringFanout sends SIGTERM while Courier writes a HelmOp's
// 24 new entries into 20 clusters, one cluster at a time. Each cluster's
// set of copies is written whole or not at all (the engine finishes the
// group it is writing and starts no other), and after a restart every copy
// is present and current. With 8 entries the whole fan-out could finish
// between the first copy and the signal.
func TestShutdownDuringFanout(t *testing.T) {
	const clusters, entries = 20, 24
	ctx := context.Background()
	w := newWorkspace(t, "ws-shutdown", make([]map[string]string, clusters)...)
	destOf := func(i int) string { return fmt.Sprintf("shutdown-c%d", i) }
	var targets []fleet.BundleTarget
	for i := 1; i <= clusters; i++ {
		target := fleet.BundleTarget{ClusterName: fmt.Sprintf("c%d", i)}
		target.TargetNamespace = destOf(i)
		targets = append(targets, target)
	}
	names := []string{"first"}
	for i := range entries {
		names = append(names, fmt.Sprintf("later-%d", i))
	}
	for _, n := range names {
		w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n}, StringData: map[string]string{"k": "value-of-" + n}})
	}
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: fleet.HelmOpSpec{Targets: targets}}
	op.Spec.DownstreamResources = resources("Secret/first")
	w.apply(op)
	var want []string
	for i := 1; i <= clusters; i++ {
		want = append(want, fmt.Sprintf("c%d/Secret/first@%s=Synced", i, destOf(i)))
	}
	w.waitRows(metav1.ListOptions{}, want...)

	// One worker makes the fan-out take long enough to stop in the middle.
	restartWith(t, []string{"--copy-workers=1"})
	logStart := logSize(t)

	var kinds []string
	for _, n := range names {
		kinds = append(kinds, "Secret/"+n)
	}
	op.Spec.DownstreamResources = resources(kinds...) // one change: every new entry at once
	w.apply(op)
	// Stop as soon as the first cluster has its new copies.
	down := []func(ns, name string) bool{}
	for i := range env.Downstreams {
		kube := downstream(t, i)
		down = append(down, func(ns, name string) bool {
			_, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("reading %s/%s: %v", ns, name, err)
			}
			return err == nil
		})
	}
	exists := func(i int, name string) bool { return down[(i-1)%len(down)](destOf(i), name) }
	deadline := time.Now().Add(30 * time.Second)
	for !exists(1, names[1]) && !exists(2, names[1]) {
		if time.Now().After(deadline) {
			t.Fatal("no new copy appeared within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := time.Now()
	courier.Stop()
	t.Logf("SIGTERM to exit: %s", time.Since(stopped).Round(10*time.Millisecond))

	whole, none := 0, 0
	for i := 1; i <= clusters; i++ {
		var have []string
		for _, n := range names[1:] {
			if exists(i, n) {
				have = append(have, n)
			}
		}
		switch len(have) {
		case entries:
			whole++
		case 0:
			none++
		default:
			t.Errorf("cluster c%d was left with %d of its %d new copies: %v", i, len(have), entries, have)
		}
	}
	t.Logf("at shutdown: %d clusters had every new copy, %d none", whole, none)
	if none == 0 {
		t.Errorf("the stop came after the fan-out had finished: the test proved nothing (make it slower)")
	}
	logText := logSince(t, logStart)
	if !strings.Contains(logText, "in-flight copies finished") {
		t.Errorf("Courier's log does not say the in-flight copies finished:\n%s", tailLines(logText, 20))
	}

	startWith(t, nil)
	want = want[:0]
	for i := 1; i <= clusters; i++ {
		for _, n := range names {
			want = append(want, fmt.Sprintf("c%d/Secret/%s@%s=Synced", i, n, destOf(i)))
		}
	}
	w.waitRows(metav1.ListOptions{}, want...)
	for i := 1; i <= clusters; i++ {
		for _, n := range names {
			waitSecret(t, (i-1)%len(env.Downstreams), destOf(i), n, 10*time.Second, "present and current", secretData("k", "value-of-"+n))
		}
	}
}

// restartWith restarts the suite's Courier with extra flags; the test's
// end restores its usual ones.
func restartWith(t *testing.T, args []string) {
	t.Helper()
	courier.Stop()
	t.Cleanup(func() {
		courier.Stop()
		startWith(t, nil)
	})
	startWith(t, args)
}

func startWith(t *testing.T, args []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := courier.StartWith(ctx, args); err != nil {
		t.Fatalf("starting Courier with %q: %v", args, err)
	}
}

func logSize(t *testing.T) int64 {
	t.Helper()
	st, err := os.Stat(courier.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func logSince(t *testing.T, offset int64) string {
	t.Helper()
	data, err := os.ReadFile(courier.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) < offset {
		return string(data)
	}
	return string(data[offset:])
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
