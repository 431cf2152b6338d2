package e2e

// 10,000 rows through the real aggregator (docs/design.md#scale): paged lists return
// every row once, and a watch open across a change of all 10,000 rows, on a
// busy machine, receives every event and stays open.

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

const (
	scaleClusters = 1000
	scaleHelmOps  = 10
	scaleRows     = scaleClusters * scaleHelmOps
)

// TestTenThousandRows builds 10,000 rows: ten HelmOps listing one Secret,
// each targeting 1,000 Clusters. The Clusters have no kubeconfig Secret, so
// nothing is written downstream; every row names the one source.
func TestTenThousandRows(t *testing.T) {
	w := newWorkspace(t, "ws-scale")
	ctx := context.Background()
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, StringData: map[string]string{"k": "1"}})
	createClusters(t, w, scaleClusters)
	for i := 0; i < scaleHelmOps; i++ {
		w.apply(helmOp(fmt.Sprintf("op%d", i), fleet.BundleDeploymentOptions{TargetNamespace: "scale", DownstreamResources: resources("Secret/shared")},
			fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"scale": "yes"}}}))
	}
	rows := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns)
	eventually(t, "10,000 rows", func() (bool, string) {
		n, err := countPaged(ctx, w, 2000)
		return err == nil && n == scaleRows, fmt.Sprintf("%d rows (err %v)", n, err)
	})

	t.Run("paged lists return every row once", func(t *testing.T) {
		for _, limit := range []int64{333, 10000} {
			names := map[string]int{}
			opts := metav1.ListOptions{Limit: limit}
			pages := 0
			for {
				list, err := rows.List(ctx, opts)
				if err != nil {
					t.Fatalf("limit %d, page %d: %v", limit, pages, err)
				}
				pages++
				if int64(len(list.Items)) > limit {
					t.Fatalf("limit %d: a page of %d rows", limit, len(list.Items))
				}
				for _, r := range list.Items {
					names[r.Name]++
				}
				if list.Continue == "" {
					break
				}
				opts.Continue = list.Continue
			}
			if want := (scaleRows + int(limit) - 1) / int(limit); pages != want {
				t.Errorf("limit %d: %d pages, want %d", limit, pages, want)
			}
			checkOnce(t, fmt.Sprintf("limit %d", limit), names)
		}
		// kubectl's own chunked list.
		out := kubectl(t, "get", "dcp", "-n", w.ns, "-o", "name", "--chunk-size=700")
		names := map[string]int{}
		for _, n := range strings.Fields(out) {
			names[n]++
		}
		checkOnce(t, "kubectl --chunk-size=700", names)
	})

	t.Run("a watch survives a change of every row on a busy machine", func(t *testing.T) {
		list, err := rows.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		watcher, err := rows.Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer watcher.Stop()
		stopBusy := busy()
		defer stopBusy()

		w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, StringData: map[string]string{"k": "2"}})
		src, err := w.c.kube.CoreV1().Secrets(w.ns).Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		changed := map[string]bool{}
		events := 0
		for len(changed) < scaleRows {
			select {
			case ev, ok := <-watcher.ResultChan():
				if !ok {
					t.Fatalf("the watch was closed after %d events, %d of %d rows at the new source version", events, len(changed), scaleRows)
				}
				events++
				switch ev.Type {
				case watch.Error:
					t.Fatalf("watch error after %d events: %v", events, ev.Object)
				case watch.Modified, watch.Added:
					r := ev.Object.(*v1alpha1.DownstreamCopy)
					if r.Spec.Source.ResourceVersion == src.ResourceVersion {
						changed[r.Name] = true
					}
				}
			case <-wctx.Done():
				t.Fatalf("after 5 minutes: %d events, %d of %d rows at the new source version", events, len(changed), scaleRows)
			}
		}
		t.Logf("%d events carried all %d rows to the new source version", events, scaleRows)
	})

	t.Run("a summary of 1,000 rows that change at once changes a bounded number of times", func(t *testing.T) {
		summaryBurst(t, w, "op0", scaleClusters)
	})
}

// createClusters creates n labelled Clusters with no kubeconfig Secret,
// eight at a time.
func createClusters(t *testing.T, w *workspace, n int) {
	t.Helper()
	f := fleetClient(t)
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%04d", i), Labels: map[string]string{"scale": "yes"}}}
				if _, err := f.FleetV1alpha1().Clusters(w.ns).Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteClusters(t, w) })
}

// deleteClusters deletes the workspace's Clusters and waits until they are
// gone. Left to the namespace's deletion, a thousand of them go over a
// minute or more on a busy machine, while the next tests count every
// pushed Cluster (TestShardedDelivery's per-replica gauges never matched
// a list taken while they went).
func deleteClusters(t *testing.T, w *workspace) {
	ctx := context.Background()
	clusters := fleetClient(t).FleetV1alpha1().Clusters(w.ns)
	if err := clusters.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the Clusters of %s: %v", w.ns, err)
		return
	}
	// Longer than eventually's 30 s: the kube-apiserver deletes a
	// collection one object at a time.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := clusters.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("the Clusters of %s not gone after 3 minutes: %v", w.ns, err)
	}
}

// countPaged counts the workspace's rows with pages of limit.
func countPaged(ctx context.Context, w *workspace, limit int64) (int, error) {
	n := 0
	opts := metav1.ListOptions{Limit: limit}
	for {
		list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, opts)
		if err != nil {
			return n, err
		}
		n += len(list.Items)
		if list.Continue == "" {
			return n, nil
		}
		opts.Continue = list.Continue
	}
}

func checkOnce(t *testing.T, what string, names map[string]int) {
	t.Helper()
	if len(names) != scaleRows {
		t.Errorf("%s: %d distinct rows, want %d", what, len(names), scaleRows)
	}
	for n, c := range names {
		if c != 1 {
			t.Errorf("%s: row %s listed %d times", what, n, c)
			return
		}
	}
}

// busy keeps every core of the machine busy until the returned func is
// called, so the watch is tested while Courier competes for CPU.
func busy() (stop func()) {
	done := make(chan struct{})
	for range runtime.NumCPU() {
		go func() {
			x := 0
			for {
				select {
				case <-done:
					return
				default:
					for i := 0; i < 1e5; i++ {
						x += i
					}
				}
			}
		}()
	}
	return func() { close(done) }
}
