package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	memSecrets   = 1000
	memSecretKiB = 64
	memTargetMiB = 20
	memNamespace = "bench-unrelated"
)

// testMemory creates 1,000 Secrets of 64 KiB in a namespace no HelmOp
// names and reports how much Courier's resident memory grew. Courier
// watches Secrets as metadata only and reads in full only what it copies,
// so it should grow by the metadata (about a KiB each), not by the 64 MiB
// of data.
func testMemory(t *testing.T) {
	ctx := context.Background()
	pid := courier.Pid()
	if pid == 0 {
		t.Fatal("Courier is not running")
	}
	kube := fastUpstream(t)

	waitIdle(t, pid, 30*time.Second)
	before, heapBefore := sampleMemory(t, ctx, pid, 5, time.Second)
	fresh, err := procMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	results.note("memory: Courier holding nothing yet: RSS %.1f MiB, of it %.1f MiB pages of mapped files (RssFile: its binary, on every replica whatever it holds)",
		float64(fresh.rss)/(1<<20), float64(fresh.file)/(1<<20))

	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: memNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	createSecrets(t, ctx, kube, memNamespace, memSecrets, memSecretKiB<<10)
	created := time.Since(began)

	// No forced GC is possible from outside: take the largest of the
	// samples over ~10 s after the creates finished, which also gives the
	// metadata watch time to deliver every event.
	after, heapAfter := sampleMemory(t, ctx, pid, 10, time.Second)
	m := memoryResult{scenario: "default flags", secrets: memSecrets, sizeKiB: memSecretKiB, before: before, after: after,
		heapBefore: heapBefore, heapAfter: heapAfter, targetMiB: memTargetMiB}
	results.addMemory(m)
	results.note("memory: %d Secrets created in %s; Courier's Go heap in use (go_memstats_heap_inuse_bytes, max of the same samples) %.1f -> %.1f MiB",
		memSecrets, created.Round(100*time.Millisecond), heapBefore/(1<<20), heapAfter/(1<<20))
	t.Logf("RSS before %.1f MiB, after %.1f MiB, delta %.1f MiB", float64(before)/(1<<20), float64(after)/(1<<20), m.deltaMiB())

	// Remove them again so the fan-out scenarios run on a quiet upstream.
	if err := kube.CoreV1().Namespaces().Delete(ctx, memNamespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNamespaceGone(t, kube, memNamespace)
	waitIdle(t, pid, 30*time.Second)
}

// fastUpstream is an upstream admin client without client-side throttling
// worth the name, for creating objects in bulk.
func fastUpstream(t *testing.T) kubernetes.Interface {
	kube, err := kubernetes.NewForConfig(fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// fastConfig is the upstream admin's config with a rate limit that never
// delays the bench's own requests.
func fastConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Upstream.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

// sampleMemory samples Courier's VmRSS (and Go heap in use from /metrics)
// n times, every interval, and returns the largest of each.
func sampleMemory(t *testing.T, ctx context.Context, pid, n int, interval time.Duration) (rss int64, heap float64) {
	t.Helper()
	for i := 0; i < n; i++ {
		if i > 0 {
			time.Sleep(interval)
		}
		r, err := rssBytes(pid)
		if err != nil {
			t.Fatal(err)
		}
		rss = max(rss, r)
		m, err := scrape(ctx)
		if err != nil {
			t.Fatal(err)
		}
		heap = max(heap, m.sum("go_memstats_heap_inuse_bytes"))
	}
	return rss, heap
}

// createSecrets creates n Secrets of size bytes of random data each, eight
// at a time.
func createSecrets(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string, n, size int) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				data := make([]byte, size)
				_, _ = rand.Read(data)
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%04d", i)}, Data: map[string][]byte{"blob": data}}
				if _, err := kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating Secrets: %v", err)
	}
}

// waitNamespaceGone waits until kube-controller-manager has finished
// deleting namespace ns.
func waitNamespaceGone(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s not deleted within 3 minutes", ns)
	}
}
