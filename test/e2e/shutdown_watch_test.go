package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// TestShutdownEndsWatches: watches through the aggregator (courier-agents'
// rows, kubectl get -w, kubectl wait) must not hold Courier's graceful
// shutdown open. On SIGTERM the server ends every watch it serves (the
// clients reconnect, to another replica in a Deployment) and the process
// exits on its own, well before the SIGKILL that follows the stop grace.
// Positive control: the watch delivers a row first.
func TestShutdownEndsWatches(t *testing.T) {
	w := newWorkspace(t, "ws-shutdown-watch", nil)
	w.apply(selectAll("default"))
	ctx := context.Background()
	rows, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Stop()
	summaries, err := w.c.courier.CourierV1alpha1().DownstreamCopySummaries(w.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=app"})
	if err != nil {
		t.Fatal(err)
	}
	defer summaries.Stop()
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: "shutdown-watch", DownstreamResources: resources("Secret/s")}))
	for _, wi := range []watch.Interface{rows, summaries} {
		select {
		case ev, ok := <-wi.ResultChan():
			if !ok || ev.Type == watch.Error {
				t.Fatalf("the watch ended before any event: %+v", ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no event on the watch within 30 s")
		}
	}

	t.Cleanup(func() { startWith(t, nil) })
	began := time.Now()
	onItsOwn := courier.Stop()
	t.Logf("SIGTERM to exit with two watches open: %s", time.Since(began).Round(10*time.Millisecond))
	if !onItsOwn {
		t.Errorf("Courier did not exit on SIGTERM within the stop grace; it was killed (open watches held its shutdown)")
	}
	for name, wi := range map[string]watch.Interface{"rows": rows, "summary": summaries} {
		deadline := time.After(30 * time.Second)
	drain:
		for {
			select {
			case _, ok := <-wi.ResultChan():
				if !ok {
					break drain
				}
			case <-deadline:
				t.Errorf("the %s watch was still open 30 s after Courier stopped", name)
				break drain
			}
		}
	}
}
