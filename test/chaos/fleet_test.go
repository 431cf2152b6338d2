package chaos

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
)

const (
	// workspace holds the simulated fleet: its Clusters, kubeconfig
	// Secrets, sources and HelmOp.
	workspace  = "chaos-ws"
	helmOpName = "fleet"
	// chaosLabel is on the sources, so on their copies: the downstream
	// watch selects by it.
	chaosLabel = "courier-chaos"
	roundKey   = "round"
	sources    = 10
	// setupWorkers create objects a few at a time.
	setupWorkers = 8
)

func clusterName(i int) string { return fmt.Sprintf("c%d", i) }
func dest(i int) string        { return fmt.Sprintf("chaos-c%d", i) }
func sourceName(j int) string  { return fmt.Sprintf("s%d", j) }

// fleetRun is the simulated fleet scenario 1 builds and the others reuse:
// n Clusters in workspace, alternately on downstream-1 and downstream-2,
// each with its own destination namespace, one HelmOp listing the sources
// in listed.
type fleetRun struct {
	ready  bool
	n      int
	listed []string // the sources the HelmOp lists now
	up     kubernetes.Interface
	fc     versioned.Interface
	down   []kubernetes.Interface // by downstream index
	w      *fleetsim.Watcher
}

// clusterCount is COURIER_CHAOS_N, else 100.
func clusterCount(t *testing.T) int {
	if s := os.Getenv("COURIER_CHAOS_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("COURIER_CHAOS_N=%q: want a number of Clusters >= 2", s)
		}
		return n
	}
	return 100
}

// downstreamOf is the index of the downstream Cluster i (1-based) reaches
// (fleetsim.CreateClusters alternates).
func (f *fleetRun) downstreamOf(i int) int { return (i - 1) % len(env.Downstreams) }

// budget bounds one wait for a fan-out: generous, it only turns a hang
// into an error.
func (f *fleetRun) budget() time.Duration {
	return 2*time.Minute + time.Duration(f.n*sources)*30*time.Millisecond
}

// keys are the arrivals that complete a fan-out of value to the Clusters
// for which on returns true (every Cluster when on is nil).
func (f *fleetRun) keys(value string, on func(i int) bool) []fleetsim.ArrivalKey {
	var out []fleetsim.ArrivalKey
	for i := 1; i <= f.n; i++ {
		if on != nil && !on(i) {
			continue
		}
		for _, name := range f.listed {
			out = append(out, fleetsim.ArrivalKey{NS: dest(i), Name: name, Value: value})
		}
	}
	return out
}

// setup creates the fleet and waits until its first copies are there and
// every row is Synced.
func (f *fleetRun) setup(t *testing.T) {
	ctx := context.Background()
	f.n = clusterCount(t)
	f.fc = fleetClient(t)
	var err error
	if f.up, err = kubernetes.NewForConfig(env.Upstream.Config); err != nil {
		t.Fatal(err)
	}
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Fatal(err)
		}
		f.down = append(f.down, kube)
	}
	if f.w, err = fleetsim.StartWatcher(env.Downstreams, chaosLabel, roundKey); err != nil {
		t.Fatal(err)
	}
	if _, err := f.up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workspace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := fleetsim.CreateClusters(ctx, f.up, f.fc, workspace, f.n, clusterName, env.Downstreams, setupWorkers); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1024)
	_, _ = rand.Read(payload)
	for j := range sources {
		f.listed = append(f.listed, sourceName(j))
		if _, err := f.up.CoreV1().Secrets(workspace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: sourceName(j), Labels: map[string]string{chaosLabel: "copy"}},
			Data:       map[string][]byte{roundKey: []byte("r0"), "payload": payload}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.fc.FleetV1alpha1().HelmOps(workspace).Create(ctx, f.helmOp(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := f.w.Wait(f.keys("r0", nil), t0, f.budget()); err != nil {
		t.Fatalf("first copies: %v\n%s", err, fleetsim.RowsSummary(f.fc, workspace))
	}
	if err := f.waitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	f.ready = true
	results.note("fleet: %d Clusters x %d Secrets of 1 KiB (%d copies) on %d downstream kube-apiservers, all Synced %s after the start of the setup",
		f.n, sources, f.n*sources, len(env.Downstreams), time.Since(began).Round(time.Second))
}

// helmOp lists f.listed with one target per Cluster, each with its own
// destination namespace.
func (f *fleetRun) helmOp() *fleet.HelmOp {
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: helmOpName}}
	for _, name := range f.listed {
		op.Spec.DownstreamResources = append(op.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "Secret", Name: name})
	}
	for i := 1; i <= f.n; i++ {
		target := fleet.BundleTarget{ClusterName: clusterName(i)}
		target.TargetNamespace = dest(i)
		op.Spec.Targets = append(op.Spec.Targets, target)
	}
	return op
}

// setListed makes the HelmOp list exactly names.
func (f *fleetRun) setListed(t *testing.T, names []string) {
	t.Helper()
	ctx := context.Background()
	f.listed = names
	want := f.helmOp()
	for {
		cur, err := f.fc.FleetV1alpha1().HelmOps(workspace).Get(ctx, helmOpName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.DownstreamResources = want.Spec.DownstreamResources
		if _, err = f.fc.FleetV1alpha1().HelmOps(workspace).Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
			return
		} else if !isConflict(err) {
			t.Fatal(err)
		}
	}
}

// change sets every source (listed or not) to value and returns when the
// updates started.
func (f *fleetRun) change(t *testing.T, value string) time.Time {
	t.Helper()
	var all []string
	for j := range sources {
		all = append(all, sourceName(j))
	}
	t0, err := fleetsim.UpdateSources(context.Background(), f.up, workspace, all, roundKey, value)
	if err != nil {
		t.Fatal(err)
	}
	return t0
}

// converge waits until every listed copy holds value (by watch) and every
// row is Synced.
func (f *fleetRun) converge(t *testing.T, value string, t0 time.Time) []time.Duration {
	t.Helper()
	lat, err := f.w.Wait(f.keys(value, nil), t0, f.budget())
	if err != nil {
		t.Fatalf("%v\n%s", err, fleetsim.RowsSummary(f.fc, workspace))
	}
	if err := f.waitSynced(context.Background()); err != nil {
		t.Fatal(err)
	}
	return lat
}

// waitSynced waits until the fleet HelmOp's rows, one per Cluster and
// listed source, are all Synced (the guard HelmOp's are Conflict by
// design, so rows are selected by HelmOp).
func (f *fleetRun) waitSynced(ctx context.Context) error {
	return fleetsim.WaitSyncedSelected(ctx, f.fc, workspace, fleetRows, f.n*len(f.listed), f.budget())
}

// fleetRows selects the fleet HelmOp's rows (the row label of their
// HelmOp).
const fleetRows = "courier.dev/helmop=" + helmOpName
