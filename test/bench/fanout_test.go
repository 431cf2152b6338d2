package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

const (
	scenarioCourier = "courier"
	scenarioSeq     = "client-go seq"
	scenarioPool    = "client-go x4"
	// scenarioPoolGet is a diagnostic row, not a baseline: the x4 loop
	// with Courier's request pattern (a live GET of the copy, then an
	// update with its resourceVersion), to show how much of the gap the
	// second request per copy explains.
	scenarioPoolGet = "client-go x4 get+put"

	// benchLabel is on the Courier source (and so on its copies) and on
	// the baseline's copies: the downstream watch selects by it.
	benchLabel = "courier-bench"
	// roundKey is the data key whose value changes every round.
	roundKey = "round"
	// poolWorkers matches Courier's default --copy-workers.
	poolWorkers = 4

	sourceName   = "fanout"
	baselineSrc  = "baseline-src"
	roundTimeout = 2 * time.Minute
	setupTimeout = 5 * time.Minute
)

// destNS is simulated cluster i's own destination namespace (i from 1).
func destNS(i int) string { return fmt.Sprintf("bench-c%d", i) }

// testFanout measures one source change fanned out to n clusters: n Fleet
// Clusters in one workspace whose kubeconfigs reach the two downstream
// kube-apiservers alternately, a HelmOp with one target per Cluster (each
// with its own destination namespace), and the same change made by a plain
// client-go loop (sequential, with a pool of 4 workers, and the diagnostic
// pool that reads each copy first) on the same apiservers and namespaces
// under other object names. Scenarios alternate round by round, so all see
// the same machine.
func testFanout(t *testing.T, n int) {
	rounds := intsFromEnv(t, "COURIER_BENCH_ROUNDS", []int{10})[0]
	ctx := context.Background()
	pid := courier.Pid()
	up := fastUpstream(t)
	fc, err := versioned.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := startWatcher(t)
	ws := fmt.Sprintf("bench-ws-%d", n)
	bns := fmt.Sprintf("bench-baseline-%d", n)
	payload := make([]byte, 1024)
	_, _ = rand.Read(payload)

	// Courier's side: Clusters, source, HelmOp.
	for _, ns := range []string{ws, bns} {
		if _, err := up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { cleanupFanout(t, up, fc, ws, bns, n) })
	for i := 1; i <= n; i++ {
		kubeconfig, err := os.ReadFile(env.Downstreams[(i-1)%len(env.Downstreams)].Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("c%d", i)
		if _, err := up.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig"},
			Data: map[string][]byte{"value": kubeconfig}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := fc.FleetV1alpha1().Clusters(ws).Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: fleet.ClusterSpec{KubeConfigSecret: name + "-kubeconfig"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	initial := fmt.Sprintf("courier-%d-r0", n)
	if _, err := up.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: sourceName, Labels: map[string]string{benchLabel: "courier"}},
		Data:       map[string][]byte{roundKey: []byte(initial), "payload": payload},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: sourceName}}
	op.Spec.DownstreamResources = []fleet.DownstreamResource{{Kind: "Secret", Name: sourceName}}
	for i := 1; i <= n; i++ {
		target := fleet.BundleTarget{ClusterName: fmt.Sprintf("c%d", i)}
		target.TargetNamespace = destNS(i)
		op.Spec.Targets = append(op.Spec.Targets, target)
	}
	began := time.Now()
	if _, err := fc.FleetV1alpha1().HelmOps(ws).Create(ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.wait(keys(n, sourceName, initial), began, setupTimeout); err != nil {
		t.Fatalf("initial copies: %v", err)
	}
	firstCopies := time.Since(began)
	waitSynced(t, fc, ws, n)
	waitIdle(t, pid, 60*time.Second)
	results.note("courier N=%d: first copy of the HelmOp into all %d clusters (new clients, informers, namespaces) took %s",
		n, n, firstCopies.Round(100*time.Millisecond))

	// The baseline's side: its own source upstream, one client per
	// simulated cluster from the same kubeconfig Secrets.
	b := &baseline{upstream: up, ns: bns}
	for i := 1; i <= n; i++ {
		s, err := up.CoreV1().Secrets(ws).Get(ctx, fmt.Sprintf("c%d-kubeconfig", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
		if err != nil {
			t.Fatal(err)
		}
		cfg.UserAgent = "courier-bench-baseline"
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b.clients = append(b.clients, c)
	}
	if _, err := up.CoreV1().Secrets(bns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: baselineSrc},
		Data: map[string][]byte{roundKey: []byte(fmt.Sprintf("baseline-%d-r0", n)), "payload": payload}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{copyName(scenarioSeq), copyName(scenarioPool), copyName(scenarioPoolGet)} {
		start := time.Now()
		if err := b.sync(ctx, name, poolWorkers, false); err != nil {
			t.Fatal(err)
		}
		if _, err := w.wait(keys(n, name, fmt.Sprintf("baseline-%d-r0", n)), start, setupTimeout); err != nil {
			t.Fatalf("initial baseline copies: %v", err)
		}
	}

	res := map[string]*fanoutResult{}
	order := []string{scenarioCourier, scenarioSeq, scenarioPool, scenarioPoolGet}
	for _, s := range order {
		res[s] = &fanoutResult{scenario: s, n: n}
	}
	diag := metrics{}   // Courier's /metrics, over the Courier rounds
	dsDiag := metrics{} // the downstream kube-apiservers' /metrics, same windows
	var courierCPU time.Duration
	for r := 1; r <= rounds; r++ {
		// Rotate the order so no scenario always runs right after another.
		for k := range order {
			s := order[(k+r)%len(order)]
			waitIdle(t, pid, 30*time.Second)
			time.Sleep(300 * time.Millisecond)
			value := fmt.Sprintf("%s-%d-r%d", strings.ReplaceAll(s, " ", "-"), n, r)
			var lat []time.Duration
			if s == scenarioCourier {
				d0, err := scrapeDownstreams(ctx)
				if err != nil {
					t.Fatal(err)
				}
				m0, err := scrape(ctx)
				if err != nil {
					t.Fatal(err)
				}
				c0, err := cpuTime(pid)
				if err != nil {
					t.Fatal(err)
				}
				t0 := updateSource(t, up, ws, sourceName, value)
				if lat, err = w.wait(keys(n, sourceName, value), t0, roundTimeout); err != nil {
					t.Fatalf("courier round %d: %v\n%s", r, err, rowsSummary(fc, ws))
				}
				waitIdle(t, pid, 30*time.Second)
				c1, err := cpuTime(pid)
				if err != nil {
					t.Fatal(err)
				}
				m1, err := scrape(ctx)
				if err != nil {
					t.Fatal(err)
				}
				d1, err := scrapeDownstreams(ctx)
				if err != nil {
					t.Fatal(err)
				}
				courierCPU += c1 - c0
				diag.add(m0, m1)
				dsDiag.add(d0, d1)
			} else {
				workers := 1
				if s != scenarioSeq {
					workers = poolWorkers
				}
				t0 := updateSource(t, up, bns, baselineSrc, value)
				if err := b.sync(ctx, copyName(s), workers, s == scenarioPoolGet); err != nil {
					t.Fatalf("%s round %d: %v", s, r, err)
				}
				if lat, err = w.wait(keys(n, copyName(s), value), t0, roundTimeout); err != nil {
					t.Fatalf("%s round %d: %v", s, r, err)
				}
			}
			res[s].latencies = append(res[s].latencies, lat...)
			res[s].makespans = append(res[s].makespans, slices.Max(lat))
		}
	}
	for _, s := range order {
		results.addFanout(res[s])
		t.Logf("%s N=%d: p50 %s p99 %s copies/s %.1f", s, n, ms(res[s].p50()), ms(res[s].p99()), res[s].copiesPerSecond())
	}
	results.note("%s", courierDiagnostics(n, rounds, courierCPU, diag, res[scenarioCourier].mean()))
	// Only Courier sends resource requests downstream in these windows (the
	// benchmark's own watches were opened before); the clusters' own
	// background requests (lease renewals, kube-controller-manager's
	// discovery of /api, /apis, /openapi/v3) show up too.
	results.note("courier N=%d, requests to the downstream kube-apiservers per round (apiserver_request_total, mean of %d): %s",
		n, rounds, dsDiag.scale(float64(rounds)).requests())
}

// courierDiagnostics says, per Courier round, how much work Courier did:
// from its CPU time and the deltas of its /metrics over the Courier rounds
// (each window runs from just before the source update until Courier is
// idle again).
func courierDiagnostics(n, rounds int, cpu time.Duration, d metrics, measuredMean time.Duration) string {
	per := func(v float64) float64 { return v / float64(rounds) }
	mean := func(name, label string) string {
		c := d.sum(name+"_count", label)
		if c == 0 {
			return "-"
		}
		return ms(time.Duration(d.sum(name+"_sum", label) / c * float64(time.Second)))
	}
	clusters := `name="courier_clusters"`
	view := `name="downstreamcopies"`
	return fmt.Sprintf("courier N=%d, per round (mean of %d): CPU %s; cluster reconciles %.0f (workqueue courier_clusters adds), "+
		"mean wait in queue %s, mean reconcile %s; view recomputes %.0f (mean %s); copies written %.0f, found current %.0f, failed %.0f; "+
		"courier_copy_propagation_seconds mean %s (Courier's own clock: from seeing the new source resourceVersion to the write) "+
		"against a measured mean of %s (update returned -> copy seen downstream)",
		n, rounds, (cpu / time.Duration(rounds)).Round(10*time.Millisecond),
		per(d.sum("workqueue_adds_total", clusters)), mean("workqueue_queue_duration_seconds", clusters), mean("workqueue_work_duration_seconds", clusters),
		per(d.sum("workqueue_adds_total", view)), mean("workqueue_work_duration_seconds", view),
		per(d.sum("courier_copies_total", `result="written"`)), per(d.sum("courier_copies_total", `result="current"`)),
		per(d.sum("courier_copies_total", `result="failed"`)), mean("courier_copy_propagation_seconds", ""), ms(measuredMean))
}

// copyName is the baseline scenario's object name downstream.
func copyName(scenario string) string {
	switch scenario {
	case scenarioSeq:
		return "baseline-seq"
	case scenarioPool:
		return "baseline-x4"
	}
	return "baseline-x4-get"
}

// keys are the arrivals that complete a round: object name with value in
// every simulated cluster's namespace.
func keys(n int, name, value string) []arrivalKey {
	out := make([]arrivalKey, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, arrivalKey{ns: destNS(i), name: name, value: value})
	}
	return out
}

// updateSource sets the source's round key to value and returns when the
// update call returned.
func updateSource(t *testing.T, kube kubernetes.Interface, ns, name, value string) time.Time {
	t.Helper()
	ctx := context.Background()
	for {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[roundKey] = []byte(value)
		_, err = kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		t0 := time.Now()
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return t0
	}
}

// baseline is the plain client-go loop Courier is compared with: after a
// source change it GETs the source and updates every copy, one client per
// simulated cluster, either sequentially or with a pool of workers. It is
// started directly after the source update returns (no watch upstream),
// so it is a lower bound for any controller.
type baseline struct {
	upstream kubernetes.Interface
	ns       string
	clients  []kubernetes.Interface // clients[i] reaches cluster c<i+1>
}

// sync GETs the source and writes it as the copy called name into every
// cluster's destination namespace, with workers requests at a time. With
// getFirst it reads each copy before updating it and sends its
// resourceVersion, as Courier does.
func (b *baseline) sync(ctx context.Context, name string, workers int, getFirst bool) error {
	src, err := b.upstream.CoreV1().Secrets(b.ns).Get(ctx, baselineSrc, metav1.GetOptions{})
	if err != nil {
		return err
	}
	copyTo := func(i int) error {
		c := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: destNS(i + 1), Labels: map[string]string{benchLabel: "baseline"}},
			Type:       src.Type,
			Data:       src.Data,
		}
		secrets := b.clients[i].CoreV1().Secrets(c.Namespace)
		if getFirst {
			cur, err := secrets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.ResourceVersion = cur.ResourceVersion
		}
		// Without getFirst no resourceVersion: Secrets allow unconditional
		// updates, so one request per copy.
		_, err := secrets.Update(ctx, c, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := b.clients[i].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}},
				metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			_, err = secrets.Create(ctx, c, metav1.CreateOptions{})
		}
		return err
	}
	if workers <= 1 {
		for i := range b.clients {
			if err := copyTo(i); err != nil {
				return err
			}
		}
		return nil
	}
	work := make(chan int)
	errs := make([]error, len(b.clients))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				errs[i] = copyTo(i)
			}
		})
	}
	for i := range b.clients {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// arrivalKey is one downstream object with one value of its round key.
type arrivalKey struct {
	ns, name, value string
}

// watcher records when each object labelled benchLabel was first seen
// downstream with each value of its round key, from a watch (informer) on
// every downstream kube-apiserver: the resolution is that of watch
// delivery, not of a polling interval.
type watcher struct {
	mu      sync.Mutex
	seen    map[arrivalKey]time.Time
	changed chan struct{} // closed and replaced on every new arrival
}

func startWatcher(t *testing.T) *watcher {
	t.Helper()
	w := &watcher{seen: map[arrivalKey]time.Time{}, changed: make(chan struct{})}
	stop := make(chan struct{})
	var factories []informers.SharedInformerFactory
	t.Cleanup(func() {
		close(stop)
		for _, f := range factories {
			f.Shutdown()
		}
	})
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Fatal(err)
		}
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchLabel }))
		inf := f.Core().V1().Secrets().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    w.observe,
			UpdateFunc: func(_, obj any) { w.observe(obj) },
		}); err != nil {
			t.Fatal(err)
		}
		factories = append(factories, f)
		f.Start(stop)
		for typ, ok := range f.WaitForCacheSync(stop) {
			if !ok {
				t.Fatalf("watching %v in %s did not sync", typ, ds.Name)
			}
		}
	}
	return w
}

func (w *watcher) observe(obj any) {
	now := time.Now()
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	k := arrivalKey{ns: s.Namespace, name: s.Name, value: string(s.Data[roundKey])}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.seen[k]; dup {
		return
	}
	w.seen[k] = now
	close(w.changed)
	w.changed = make(chan struct{})
}

// wait returns, once every key has arrived, the time from t0 to each
// arrival.
func (w *watcher) wait(keys []arrivalKey, t0 time.Time, timeout time.Duration) ([]time.Duration, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		var missing []string
		out := make([]time.Duration, 0, len(keys))
		for _, k := range keys {
			at, ok := w.seen[k]
			if !ok {
				missing = append(missing, k.ns)
				continue
			}
			out = append(out, max(at.Sub(t0), 0))
		}
		changed := w.changed
		w.mu.Unlock()
		if len(missing) == 0 {
			return out, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return nil, fmt.Errorf("%d of %d copies with %s=%s did not arrive within %s (missing in %v)",
				len(missing), len(keys), roundKey, keys[0].value, timeout, missing)
		}
	}
}

// waitSynced waits until the workspace shows n DownstreamCopy rows, all
// Synced, read through the aggregator as a user would.
func waitSynced(t *testing.T, fc versioned.Interface, ns string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := fc.CourierV1alpha1().DownstreamCopies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		synced := 0
		for _, r := range list.Items {
			if r.Status.Phase == courierv1alpha1.CopyPhaseSynced {
				synced++
			}
		}
		return len(list.Items) == n && synced == n, nil
	})
	if err != nil {
		t.Fatalf("rows in %s not all Synced:\n%s", ns, rowsSummary(fc, ns))
	}
}

// rowsSummary counts the workspace's rows by phase, with one message per
// phase, for failures.
func rowsSummary(fc versioned.Interface, ns string) string {
	list, err := fc.CourierV1alpha1().DownstreamCopies(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	count := map[courierv1alpha1.CopyPhase]int{}
	msg := map[courierv1alpha1.CopyPhase]string{}
	for _, r := range list.Items {
		count[r.Status.Phase]++
		msg[r.Status.Phase] = r.Status.Message
	}
	var b strings.Builder
	for p, c := range count {
		fmt.Fprintf(&b, "  %s: %d (e.g. %s)\n", p, c, msg[p])
	}
	return b.String()
}

// cleanupFanout removes what testFanout made, so the next N starts from a
// quiet system: the HelmOp first (Courier removes its copies), then the
// baseline's copies, then the namespaces with the Clusters.
func cleanupFanout(t *testing.T, up kubernetes.Interface, fc versioned.Interface, ws, bns string, n int) {
	ctx := context.Background()
	if err := fc.FleetV1alpha1().HelmOps(ws).Delete(ctx, sourceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the HelmOp: %v", err)
	}
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Error(err)
			return
		}
		for i := 1; i <= n; i++ {
			for _, name := range []string{copyName(scenarioSeq), copyName(scenarioPool), copyName(scenarioPoolGet)} {
				if err := kube.CoreV1().Secrets(destNS(i)).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting %s/%s in %s: %v", destNS(i), name, ds.Name, err)
				}
			}
		}
		err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=courier"})
			return err == nil && len(l.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("Courier's copies in %s not removed after the HelmOp was deleted", ds.Name)
		}
	}
	for _, ns := range []string{ws, bns} {
		if err := up.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	}
	for _, ns := range []string{ws, bns} {
		waitNamespaceGone(t, up, ns)
	}
	waitIdle(t, courier.Pid(), 30*time.Second)
}
