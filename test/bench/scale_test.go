package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/downstream"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
)

const (
	// benchLabel is on Courier's sources (and so on its copies) and on the
	// pool's copies: the downstream watch selects by it.
	benchLabel = "courier-bench"
	// roundKey is the data key whose value changes every round.
	roundKey = "round"
	// sourcesPerOp is how many Secrets the HelmOp lists.
	sourcesPerOp = 10
	// defaultSourceBytes is each source's payload, besides its round key,
	// unless COURIER_BENCH_SOURCE_BYTES says otherwise.
	defaultSourceBytes = 1024
	helmOpName         = "scale"
	// setupWorkers create Clusters, kubeconfig Secrets and ConfigMaps
	// upstream, a few at a time.
	setupWorkers = 8

	sideCourier = "courier"
	// sidePlain is the plain loop: a client-go pool writing one-label
	// copies, the judge. sideShape is the same loop writing copies
	// of the shape of Courier's (the frozen fixture).
	sidePlain = "plain"
	sideShape = "shape"
	kindAll   = "every source"
	kindOne   = "one source"
)

// layout names what one N uses.
type layout struct{ n int }

func (l layout) workspace() string        { return fmt.Sprintf("bench-%d-ws", l.n) }
func (l layout) poolSources() string      { return fmt.Sprintf("bench-%d-pool", l.n) }
func (l layout) listNS() string           { return fmt.Sprintf("bench-%d-list", l.n) }
func (l layout) courierDest(i int) string { return fmt.Sprintf("bench-%d-c%d", l.n, i) }
func (l layout) plainDest(i int) string   { return fmt.Sprintf("bench-%d-p%d", l.n, i) }
func (l layout) shapeDest(i int) string   { return fmt.Sprintf("bench-%d-q%d", l.n, i) }
func clusterName(i int) string            { return fmt.Sprintf("c%d", i) }
func sourceName(j int) string             { return fmt.Sprintf("s%d", j) }

// sides are the three sides of every measured step: Courier and the two
// pools.
var sides = []string{sideCourier, sidePlain, sideShape}

// baselines are the pools, in the order the table prints them.
var baselines = []string{sidePlain, sideShape}

// sideOrder is the order of the sides in a group of steps: Courier, plain
// loop, same-shape pool, and the reverse every other time, so that over
// two groups Courier goes before each pool as often as after it.
func sideOrder(forward bool) []string {
	if forward {
		return []string{sideCourier, sidePlain, sideShape}
	}
	return []string{sideShape, sidePlain, sideCourier}
}

// dest is side's destination namespace for cluster i: the rounds' (those
// the last new-HelmOp sample made) when sample is 0, else that sample's.
func (l layout) dest(side string, sample, i int) string {
	if sample == 0 {
		switch side {
		case sideCourier:
			return l.courierDest(i)
		case sidePlain:
			return l.plainDest(i)
		default:
			return l.shapeDest(i)
		}
	}
	return fmt.Sprintf("bench-%d-k%d%s%d", l.n, sample, side[:1], i)
}

func allSources() []string {
	out := make([]string, sourcesPerOp)
	for j := range out {
		out[j] = sourceName(j)
	}
	return out
}

// budget bounds one wait for copies: generous, as it only turns a hang
// into an error; nothing is judged by it.
func (l layout) budget() time.Duration {
	return 2*time.Minute + time.Duration(l.n*sourcesPerOp)*30*time.Millisecond
}

// keys are the arrivals that complete a round: every named source with
// value in every cluster's destination namespace.
func (l layout) keys(dest func(int) string, names []string, value string) []fleetsim.ArrivalKey {
	out := make([]fleetsim.ArrivalKey, 0, l.n*len(names))
	for i := 1; i <= l.n; i++ {
		for _, name := range names {
			out = append(out, fleetsim.ArrivalKey{NS: dest(i), Name: name, Value: value})
		}
	}
	return out
}

// roundsFor is how many rounds of each kind run at n: COURIER_BENCH_ROUNDS,
// else 6 up to 100 Clusters and 4 above (a round of every source at 1,000
// Clusters is 10,000 copies on each side). Even, so that each side runs
// first in as many rounds as the other (rounds).
func roundsFor(t *testing.T, n int) int {
	def := 6
	if n > 100 {
		def = 4
	}
	return intsFromEnv(t, "COURIER_BENCH_ROUNDS", []int{def})[0]
}

// testScale is the scale benchmark (docs/benchmarks.md) for n simulated Fleet Clusters: n
// Clusters in one workspace whose kubeconfigs reach the two downstream
// kube-apiservers alternately, one HelmOp listing 10 Secrets of 1 KiB with
// one target per Cluster, each with its own destination namespace; and
// the client-go pool doing the same copies into namespaces of its own on
// the same kube-apiservers. It measures, side by side, a new HelmOp's
// creates, rounds of one change of every source and of one source,
// then what Courier holds idle, then listing the rows against listing as
// many ConfigMaps of the same size. last skips the cleanup when nothing
// runs after it.
func testScale(t *testing.T, n int, last bool) {
	ctx := context.Background()
	l := layout{n}
	pid := courier.Pid()
	if pid == 0 {
		t.Fatal("Courier is not running")
	}
	up := fastUpstream(t)
	fc, err := versioned.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{l.workspace(), l.poolSources()} {
		if _, err := up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if !last {
		t.Cleanup(func() { cleanupScale(t, up, fc, l) })
	}
	w := startWatcher(t)

	// Clusters, each with its kubeconfig Secret, and the sources of both
	// sides.
	began := time.Now()
	kubeconfigs := createClusters(t, ctx, up, fc, l)
	payload := make([]byte, intsFromEnv(t, "COURIER_BENCH_SOURCE_BYTES", []int{defaultSourceBytes})[0])
	_, _ = rand.Read(payload)
	for _, name := range allSources() {
		for ns, labels := range map[string]map[string]string{l.workspace(): {benchLabel: sideCourier}, l.poolSources(): nil} {
			if _, err := up.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Data: map[string][]byte{roundKey: []byte("r0"), "payload": payload}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	created := time.Since(began)
	waitIdle(t, pid, l.budget())
	results.note("N=%d: %d Clusters with kubeconfig Secrets and 2 x %d sources of %d bytes of payload created in %s; Courier idle again %s after the start",
		n, n, sourcesPerOp, len(payload), created.Round(100*time.Millisecond), time.Since(began).Round(time.Second))
	s := &scaleRun{t: t, l: l, pid: pid, up: up, fc: fc, cc: fastCourier(t), w: w, pools: map[string]*pool{}, stats: map[string]*roundStats{},
		ready: map[string][]readyPair{}}
	for _, side := range baselines {
		s.pools[side] = newPool(side, up, l.poolSources(), kubeconfigs, func(i int) string { return l.dest(side, 0, i) })
	}
	s.newHelmOp()
	s.rounds(roundsFor(t, n))
	s.hold()
	s.list()
	s.report()
}

// createClusters creates n kubeconfig Secrets and Clusters, setupWorkers at
// a time, and returns the kubeconfigs by cluster index.
func createClusters(t *testing.T, ctx context.Context, up kubernetes.Interface, fc versioned.Interface, l layout) [][]byte {
	t.Helper()
	kubeconfigs, err := fleetsim.CreateClusters(ctx, up, fc, l.workspace(), l.n, clusterName, env.Downstreams, setupWorkers)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfigs
}

// scaleRun is one N's state while it is measured.
type scaleRun struct {
	t   *testing.T
	l   layout
	pid int
	up  kubernetes.Interface
	fc  versioned.Interface
	cc  versioned.Interface // through the aggregator, for the summaries
	w   *fleetsim.Watcher
	// ready are, per kind, the rounds' times to the summary's Ready=True
	// beside their times to the last copy (ready_test.go).
	ready map[string][]readyPair
	pools map[string]*pool // sidePlain, sideShape

	create  map[string]*roundStats // side -> the new-HelmOp samples
	stats   map[string]*roundStats // side + kind -> rounds
	diag    map[string]*courierWindow
	poolCPU time.Duration // Courier's CPU time during the pool's rounds
	rss     int64
	heap    float64
	idleCPU float64 // cores
	idleFor time.Duration
	listing *listResult
	spans   map[string]*spanCost // side + kind -> what the rounds cost the machine
	// notQuiet counts the measurements that started with the machine busy
	// (waitMachineQuiet timed out).
	notQuiet int
	// settled adds up the waits for kube-controller-manager before each
	// measurement, and settleWaits counts those that had to wait.
	settled     time.Duration
	settleWaits int
	// shape describes one copy of each side as written, and the fixture.
	shape string
}

func (s *scaleRun) stat(side, kind string) *roundStats {
	k := side + "/" + kind
	if s.stats[k] == nil {
		s.stats[k] = &roundStats{side: side, kind: kind, n: s.l.n}
	}
	return s.stats[k]
}

// createSamples is how many new-HelmOp samples each side takes at n:
// COURIER_BENCH_CREATE_SAMPLES, else 4 up to 100 Clusters and 1 above (a
// sample at 1,000 Clusters is 10,000 creates and 1,000 namespaces per side,
// and Courier's removal of its copies after it).
func createSamples(t *testing.T, n int) int {
	def := 4
	if n > 100 {
		def = 1
	}
	return intsFromEnv(t, "COURIER_BENCH_CREATE_SAMPLES", []int{def})[0]
}

// newHelmOp measures a new HelmOp's N x 10 copies, createSamples times per
// side: Courier's (from the HelmOp's create to the last copy seen
// downstream) and each pool's (from the start of its run to its last
// copy), in sideOrder, forward in odd samples and reversed in even ones.
// Every sample writes into namespaces of its own, created inside the
// window by each side. The first sample is cold on every side: Courier
// builds a client and informers for a Cluster when a HelmOp first targets
// it, the pools build their clientsets; later samples are warm on every
// side (Courier keeps a Cluster's client while the Cluster exists, the
// pools keep theirs). All samples but the last are removed again (the
// HelmOp deleted, Courier's copies gone); the last one's copies are the
// rounds'.
func (s *scaleRun) newHelmOp() {
	t, l := s.t, s.l
	s.create = map[string]*roundStats{}
	k := createSamples(t, l.n)
	for sample := 1; sample <= k; sample++ {
		last := sample == k
		tag := sample
		if last {
			tag = 0
		}
		for _, side := range sideOrder(sample%2 == 1) {
			s.createOnce(side, sample, tag)
		}
		if !last {
			s.dropSample(sample)
		}
	}
	for _, side := range sides {
		t.Logf("N=%d new HelmOp: %s %s", l.n, side, durations(s.create[side].makespans))
	}
	s.checkShape()
}

// createOnce is one side's new-HelmOp sample, once kube-controller-manager,
// Courier and the machine are quiet. tag names the sample's namespaces and
// HelmOp (0: the rounds' own).
func (s *scaleRun) createOnce(side string, sample, tag int) {
	t, ctx, l := s.t, context.Background(), s.l
	s.quiet()
	if s.create[side] == nil {
		s.create[side] = &roundStats{side: side, kind: "new HelmOp", n: l.n}
	}
	dest := func(i int) string { return l.dest(side, tag, i) }
	keys := l.keys(dest, allSources(), "r0")
	var lat []time.Duration
	var err error
	if side == sideCourier {
		op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: sampleHelmOp(tag)}}
		for _, name := range allSources() {
			op.Spec.DownstreamResources = append(op.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "Secret", Name: name})
		}
		for i := 1; i <= l.n; i++ {
			target := fleet.BundleTarget{ClusterName: clusterName(i)}
			target.TargetNamespace = dest(i)
			op.Spec.Targets = append(op.Spec.Targets, target)
		}
		win := s.openWindow()
		finishProfile := func() {}
		if sample == 1 {
			finishProfile = startCPUProfile(t, fmt.Sprintf("cpu-%d-new-helmop.pprof", l.n), profileSeconds(t))
		}
		time.Sleep(limiterRefill)
		t0 := time.Now()
		if _, err := s.fc.FleetV1alpha1().HelmOps(l.workspace()).Create(ctx, op, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if lat, err = s.w.Wait(keys, t0, l.budget()); err != nil {
			t.Fatalf("Courier's first copies, sample %d: %v\n%s", sample, err, rowsSummary(s.fc, l.workspace()))
		}
		waitSynced(t, s.fc, l.workspace(), l.n*sourcesPerOp, l.budget())
		waitIdle(t, s.pid, l.budget())
		s.closeWindow(win, "new HelmOp")
		finishProfile()
	} else {
		s.openWindow() // the same /metrics scrapes as Courier's window, not recorded
		finishProfile := func() {}
		if sample == 1 {
			finishProfile = startServerProfile(t, fmt.Sprintf("cpu-%d-new-helmop-%s.pprof", l.n, side), profileSeconds(t))
		}
		time.Sleep(limiterRefill)
		t0 := time.Now()
		if err := s.pools[side].create(ctx, allSources(), dest); err != nil {
			t.Fatalf("the %s pool's first copies, sample %d: %v", side, sample, err)
		}
		if lat, err = s.w.Wait(keys, t0, l.budget()); err != nil {
			t.Fatalf("the %s pool's first copies, sample %d: %v", side, sample, err)
		}
		finishProfile()
	}
	s.create[side].add(l.n*sourcesPerOp, lat)
}

func sampleHelmOp(tag int) string {
	if tag == 0 {
		return helmOpName
	}
	return fmt.Sprintf("%s-k%d", helmOpName, tag)
}

// dropSample deletes a new-HelmOp sample's HelmOp and waits until Courier
// has removed its copies and the rows are gone, so that the next sample
// starts from none. The pools' copies of the sample stay where they are
// (idle objects; the cleanup deletes their namespaces).
func (s *scaleRun) dropSample(sample int) {
	t, ctx, l := s.t, context.Background(), s.l
	if err := s.fc.FleetV1alpha1().HelmOps(l.workspace()).Delete(ctx, sampleHelmOp(sample), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, l.budget(), true, func(ctx context.Context) (bool, error) {
			list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + sideCourier})
			return err == nil && len(list.Items) == 0, nil
		})
		if err != nil {
			t.Fatalf("%s: Courier's copies of new-HelmOp sample %d not removed after its HelmOp was deleted", ds.Name, sample)
		}
	}
	if err := waitRows(ctx, s.fc, l.workspace(), 0); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s.pid, l.budget())
}

// quiet waits, before a measurement, until kube-controller-manager has
// settled every destination namespace, Courier is idle and then the
// machine is quiet.
func (s *scaleRun) quiet() {
	if d := waitNamespacesSettled(s.t, s.l); d > time.Second {
		s.settled += d
		s.settleWaits++
	}
	waitIdle(s.t, s.pid, s.l.budget())
	if !waitMachineQuiet(s.t) {
		s.notQuiet++
	}
}

// checkShape compares the fixture with a copy Courier wrote (drift fails
// the test) and records one copy of each side as written.
func (s *scaleRun) checkShape() {
	t, l := s.t, s.l
	c := readCopy(t, l.courierDest(1))
	if c == nil {
		t.Fatalf("no copy %s/%s downstream", l.courierDest(1), sourceName(0))
	}
	courierShape, fixture, drift := checkShapeFixture(c)
	if drift != "" {
		t.Errorf("the same-shape pool's fixture no longer has the shape of Courier's copies: Courier's copy has %s; "+
			"rewrite shapeLabels and shapeAnnotations from a copy Courier writes", drift)
	}
	written := func(side string) string {
		c := readCopy(t, l.dest(side, 0, 1))
		if c == nil {
			return "not found"
		}
		return shapeOf(c.Labels, c.Annotations, "").String()
	}
	s.shape = fmt.Sprintf("N=%d, one copy's metadata as written: Courier %s; plain loop %s; same-shape pool %s (the fixture: %s; Courier's: %s; drift: %s)",
		l.n, written(sideCourier), written(sidePlain), written(sideShape), fixture, courierShape, orNone(drift))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// readCopy reads copy s0 in namespace ns from whichever downstream
// kube-apiserver holds it, or returns nil.
func readCopy(t *testing.T, ns string) *corev1.Secret {
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := kube.CoreV1().Secrets(ns).Get(context.Background(), sourceName(0), metav1.GetOptions{}); err == nil {
			return c
		}
	}
	return nil
}

// waitNamespacesSettled waits until kube-controller-manager has done its
// work for every destination namespace (the kube-root-ca.crt ConfigMap and
// the default ServiceAccount in each, at its own request limit), so that
// its backlog -- up to 4,000 writes at N=1,000, a minute and more after
// the namespaces were made -- does not land in whichever rounds come first.
// At N=1,000 it was still writing 34 objects per one-source round. It runs
// before every measurement, each side's alike, and returns how long it
// waited.
func waitNamespacesSettled(t *testing.T, l layout) time.Duration {
	ctx := context.Background()
	start := time.Now()
	prefix := fmt.Sprintf("bench-%d-", l.n)
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Fatal(err)
		}
		var missing int
		err = wait.PollUntilContextTimeout(ctx, time.Second, l.budget(), true, func(ctx context.Context) (bool, error) {
			missing = 0
			namespaces, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			cms, err1 := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kube-root-ca.crt"})
			sas, err2 := kube.CoreV1().ServiceAccounts("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=default"})
			if err1 != nil || err2 != nil {
				return false, nil
			}
			have := map[string]int{}
			for _, cm := range cms.Items {
				have[cm.Namespace]++
			}
			for _, sa := range sas.Items {
				have[sa.Namespace]++
			}
			for _, ns := range namespaces.Items {
				if strings.HasPrefix(ns.Name, prefix) && have[ns.Name] < 2 {
					missing++
				}
			}
			return missing == 0, nil
		})
		if err != nil {
			t.Fatalf("%s: kube-controller-manager has not settled %d destination namespaces within %s", ds.Name, missing, l.budget())
		}
	}
	return time.Since(start)
}

// rounds runs r rounds. Each has, for Courier and for each pool, one
// change of every source (N x 10 copies) and oneSourceRepeats changes of
// one source (N copies; a different source each time): the one-source
// steps are short and noisy, so each round has several. The steps of a
// kind go in groups of three, one per side, in sideOrder: odd rounds run
// the steps of every source forward (Courier, plain loop, same-shape pool)
// and then the one-source groups forward, reversed, forward; even rounds
// the other way round. A fixed order would always run one side's
// one-source step in the other's wake (the kube-apiservers still
// collecting the garbage of 10,000 writes); over two rounds Courier goes
// before each pool as often as after it. Each measurement starts once
// kube-controller-manager has settled the destination namespaces, Courier
// and then the machine are quiet, the /metrics scrapes of the diagnostics
// are done, and limiterRefill has passed after them (which refills
// client-go's rate limiters, so no measurement inherits the previous one's
// throttling, and lets the servers finish the work the scrapes made).
func (s *scaleRun) rounds(r int) {
	for round := 1; round <= r; round++ {
		forward := round%2 == 1
		var steps []step
		for _, side := range sideOrder(forward) {
			steps = append(steps, step{side, kindAll, 0})
		}
		for rep := 0; rep < oneSourceRepeats; rep++ {
			for _, side := range sideOrder(forward) {
				steps = append(steps, step{side, kindOne, rep})
			}
			forward = !forward
		}
		for _, st := range steps {
			s.measure(round, st)
		}
	}
}

// oneSourceRepeats is how many one-source changes each side measures per
// round.
const oneSourceRepeats = 3

// step is one measurement of a round: rep numbers the one-source steps of
// a side within it.
type step struct {
	side, kind string
	rep        int
}

// measure runs one step of a round and records its arrivals.
func (s *scaleRun) measure(round int, st step) {
	t, ctx, l := s.t, context.Background(), s.l
	s.quiet()
	names := allSources()
	if st.kind == kindOne {
		names = []string{sourceName((round*oneSourceRepeats + st.rep) % sourcesPerOp)}
	}
	value := fmt.Sprintf("%s-%s-r%d-%d", st.side, strings.Fields(st.kind)[0], round, st.rep)
	profileName := fmt.Sprintf("cpu-%d-%s", l.n, strings.ReplaceAll(st.kind, " ", "-"))
	dest := func(i int) string { return l.dest(st.side, 0, i) }
	// Every side's steps scrape the same /metrics before they start.
	win := s.openWindow()
	quietFrom, _ := machineCPU()
	time.Sleep(limiterRefill)
	var lat []time.Duration
	var err error
	if st.side == sideCourier {
		finishProfile := profileRound(t, profileName, round, st.rep, startCPUProfile)
		span := s.beginSpan(win, quietFrom)
		t0 := updateSources(t, s.up, l.workspace(), names, value)
		rw := startReadyWait(s.cc, l.workspace(), helmOpName, t0, l.budget())
		if lat, err = s.w.Wait(l.keys(dest, names, value), t0, l.budget()); err != nil {
			t.Fatalf("courier, %s, round %d: %v\n%s", st.kind, round, err, rowsSummary(s.fc, l.workspace()))
		}
		// The span ends at the last copy, as the other sides' do: what
		// Courier does after it (its status objects, the summary the
		// Ready wait reads) is not in the time measured either.
		s.endSpan(span, st.side, st.kind)
		readyAfter, err := rw.result()
		if err != nil {
			t.Fatalf("courier, %s, round %d: %v\n%s", st.kind, round, err, rowsSummary(s.fc, l.workspace()))
		}
		s.ready[st.kind] = append(s.ready[st.kind], readyPair{ready: readyAfter, last: fleetsim.MaxDuration(lat)})
		waitIdle(t, s.pid, l.budget())
		s.closeWindow(win, st.kind)
		finishProfile()
	} else {
		finishProfile := profileRound(t, profileName+"-"+st.side, round, st.rep, startServerProfile)
		c0 := mustCPU(t, s.pid)
		span := s.beginSpan(win, quietFrom)
		t0 := updateSources(t, s.up, l.poolSources(), names, value)
		if err := s.pools[st.side].update(ctx, names); err != nil {
			t.Fatalf("%s, %s, round %d: %v", st.side, st.kind, round, err)
		}
		if lat, err = s.w.Wait(l.keys(dest, names, value), t0, l.budget()); err != nil {
			t.Fatalf("%s, %s, round %d: %v", st.side, st.kind, round, err)
		}
		s.endSpan(span, st.side, st.kind)
		s.poolCPU += mustCPU(t, s.pid) - c0
		finishProfile()
	}
	s.stat(st.side, st.kind).add(len(names)*l.n, lat)
	t.Logf("N=%d round %d %s %s (%d): last copy after %s", l.n, round, st.side, st.kind, st.rep, fleetsim.MaxDuration(lat).Round(time.Millisecond))
}

// hold measures what Courier costs while it holds N Clusters x 10 copies
// and nothing changes: resident memory (the largest of 5 samples, after it
// has been idle for a while) and CPU over idleWindow.
func (s *scaleRun) hold() {
	t := s.t
	waitIdle(t, s.pid, s.l.budget())
	time.Sleep(5 * time.Second)
	s.rss, s.heap = sampleMemory(t, context.Background(), s.pid, 5, time.Second)
	saveHeapProfile(t, fmt.Sprintf("heap-%d.pprof", s.l.n))
	s.idleFor = idleWindow
	c0 := mustCPU(t, s.pid)
	time.Sleep(s.idleFor)
	s.idleCPU = (mustCPU(t, s.pid) - c0).Seconds() / s.idleFor.Seconds()
}

const (
	// idleWindow is how long idle CPU is measured.
	idleWindow = 30 * time.Second
	// limiterRefill refills the per-cluster token bucket both Courier's
	// downstream clients and the pool's have (downstream.QPS, Burst):
	// burst / QPS.
	limiterRefill = time.Duration(float64(downstream.Burst) / float64(downstream.QPS) * float64(time.Second))
)

func mustCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	c, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// updateSources sets the round key of each named source in ns to value,
// all at once, and returns when it started: the time a round is measured
// from, the same for both sides.
func updateSources(t *testing.T, kube kubernetes.Interface, ns string, names []string, value string) time.Time {
	t.Helper()
	t0, err := fleetsim.UpdateSources(context.Background(), kube, ns, names, roundKey, value)
	if err != nil {
		t.Fatal(err)
	}
	return t0
}
