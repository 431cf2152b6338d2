package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
	"github.com/courier-dev/courier/test/localenv"
)

// scaleOutReplicas is how many replicas share delivery in the scale-out
// case, against one.
const scaleOutReplicas = 3

// The targets of the scale-out case: each of the replicas' CPU for
// a change of every source and its RSS at most this share of the single
// replica's; the time to the last copy at most this multiple of it.
const (
	scaleOutShareTarget = 0.45
	scaleOutTimeTarget  = 1.1
)

// scaleOutSample is one configuration's measurement of one change of every
// source: each replica's CPU over it and RSS after it, the time to the
// last copy and the downstream writes it caused.
type scaleOutSample struct {
	replicas int
	cpu      []time.Duration // per replica
	rss      []int64         // per replica, bytes
	file     []int64         // per replica, bytes of rss that are mapped files' pages (RssFile)
	last     time.Duration
	t0, end  time.Time // the window the writes are counted in
	writes   int
	rebuilds []float64 // per replica: shared downstream watches rebuilt in the window
}

// scaleOutResult is both configurations' samples at one N.
type scaleOutResult struct {
	n       int
	samples map[int][]scaleOutSample // by replica count
}

// testScaleOut is the scale-out push benchmark: the N Clusters × 10 copies
// the last scale case left behind (its HelmOp "scale" and its Clusters),
// delivered by one fresh replica and by three fresh replicas sharing the
// buckets, side by side: for each configuration a change of every source,
// timed to the last copy, with each replica's CPU over it, its RSS after
// it, and the downstream writes it caused (from the kube-apiservers' audit
// logs). Rounds alternate which configuration goes first. Every
// configuration starts from fresh processes, as Go's heap does not shrink
// back; each waits until every replica is idle with every row Synced
// before it is measured. The suite's Courier is back when it ends.
func testScaleOut(t *testing.T, n int) {
	if n == 0 {
		t.Skip("no scale case ran, so there are no Clusters to share")
	}
	l := layout{n}
	rounds := intsFromEnv(t, "COURIER_BENCH_SCALEOUT_ROUNDS", []int{2})[0]
	so := &scaleOut{t: t, l: l, up: fastUpstream(t), fc: fastCourier(t), w: startWatcher(t)}
	courier.Stop()
	t.Cleanup(so.restoreSuiteCourier)
	res := scaleOutResult{n: n, samples: map[int][]scaleOutSample{}}
	for round := 1; round <= rounds; round++ {
		order := []int{1, scaleOutReplicas}
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, replicas := range order {
			s := so.measure(round, replicas)
			res.samples[replicas] = append(res.samples[replicas], s)
		}
	}
	so.stop()
	so.countWrites(res)
	results.addScaleOut(res)
}

// scaleOut is the scale-out case's state.
type scaleOut struct {
	t       *testing.T
	l       layout
	up      kubernetes.Interface
	fc      versioned.Interface
	w       *fleetsim.Watcher
	running []*localenv.Courier
}

// start stops what runs and starts n fresh replicas (a single process for
// 1), then waits until each is idle and every row is Synced.
func (so *scaleOut) start(n int) {
	t := so.t
	so.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := localenv.CourierOptions{Binary: courier.Binary(), Args: benchCourierArgs()}
	var err error
	if n == 1 {
		var c *localenv.Courier
		c, err = env.StartCourier(ctx, o)
		so.running = []*localenv.Courier{c}
	} else {
		so.running, _, err = env.StartCourierReplicas(ctx, o, n)
	}
	if err != nil {
		t.Fatalf("starting %d replicas: %v", n, err)
	}
	so.settle()
}

// settle waits until every row is Synced, every replica's shared
// downstream watches have settled (narrowed to the Clusters it delivers
// to, where they will be) and every replica is idle: a replica just
// started or handed Clusters relists once its watches settle, and that
// list is not the change the sample measures.
func (so *scaleOut) settle() {
	t, l := so.t, so.l
	so.waitSummarySynced()
	for _, c := range so.running {
		so.waitWatchesSettled(c)
		waitIdle(t, c.Pid(), l.budget())
	}
}

// waitSummarySynced waits until the HelmOp's summary counts every one of
// its rows Synced at its source's current resourceVersion, reading it by
// name once a second as `kubectl get dcs` does. A read of the summary
// sums up what changed since the last; the list of every row that
// fleetsim.WaitSynced makes every 2 s (8 MB at N=1,000) cost the replica
// serving it tens of milliseconds of the CPU measured here.
func (so *scaleOut) waitSummarySynced() {
	t, l := so.t, so.l
	want := int32(l.n * sourcesPerOp)
	summaries := so.fc.CourierV1alpha1().DownstreamCopySummaries(l.workspace())
	var last *v1alpha1.DownstreamCopySummary
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, l.budget(), true, func(ctx context.Context) (bool, error) {
		s, err := summaries.Get(ctx, helmOpName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		return ready(s) && s.Status.Copies == want && s.Status.SyncedCopies == want, nil
	})
	if err != nil {
		t.Fatalf("summary %s/%s: not every one of %d rows Synced (last read: %+v):\n%s", l.workspace(), helmOpName, want, summaryCounts(last), rowsSummary(so.fc, l.workspace()))
	}
}

// summaryCounts is a summary's counts, for a failure message.
func summaryCounts(s *v1alpha1.DownstreamCopySummary) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("copies %d, synced %d, phases %v", s.Status.Copies, s.Status.SyncedCopies, s.Status.Phases)
}

// waitWatchesSettled waits until c reports no shared downstream watch
// settling.
func (so *scaleOut) waitWatchesSettled(c *localenv.Courier) {
	ctx, cancel := context.WithTimeout(context.Background(), so.l.budget())
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		m, err := scrapeFrom(ctx, c.Config)
		if err != nil {
			last = err
			return false, nil
		}
		v, ok := m["courier_downstream_watch_sets_settling"]
		return ok && v == 0, nil
	})
	if err != nil {
		so.t.Logf("replica on port %d: shared watches still settling after %s (last scrape error: %v); going on", c.Port, so.l.budget(), last)
	}
}

// rebuilds returns each running replica's count of shared downstream
// watches rebuilt so far.
func (so *scaleOut) rebuilds() []float64 {
	out := make([]float64, len(so.running))
	for i, c := range so.running {
		m, err := scrapeFrom(context.Background(), c.Config)
		if err != nil {
			so.t.Fatalf("scraping replica on port %d: %v", c.Port, err)
		}
		out[i] = m["courier_downstream_watch_rebuilds_total"]
	}
	return out
}

func (so *scaleOut) stop() {
	for _, c := range so.running {
		c.Stop()
	}
	so.running = nil
}

func (so *scaleOut) restoreSuiteCourier() {
	so.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := courier.Start(ctx); err != nil {
		so.t.Errorf("restarting the suite's Courier: %v", err)
	}
}

// measure starts replicas fresh and measures one change of every source.
func (so *scaleOut) measure(round, replicas int) scaleOutSample {
	t, l := so.t, so.l
	so.start(replicas)
	waitNamespacesSettled(t, l)
	waitMachineQuiet(t)
	time.Sleep(limiterRefill)
	s := scaleOutSample{replicas: replicas}
	rebuilt := so.rebuilds()
	before := so.cpu()
	wait := so.profile(round, replicas)
	value := fmt.Sprintf("scaleout-%d-r%d", replicas, round)
	s.t0 = updateSources(t, so.up, l.workspace(), allSources(), value)
	lat, err := so.w.Wait(l.keys(l.courierDest, allSources(), value), s.t0, l.budget())
	if err != nil {
		t.Fatalf("%d replicas, round %d: %v\n%s", replicas, round, err, rowsSummary(so.fc, l.workspace()))
	}
	s.last = fleetsim.MaxDuration(lat)
	so.settle()
	s.end = time.Now()
	after := so.cpu()
	wait()
	for i, r := range so.rebuilds() {
		s.rebuilds = append(s.rebuilds, r-rebuilt[i])
	}
	for i, c := range so.running {
		s.cpu = append(s.cpu, after[i]-before[i])
		var m procMem
		for range 3 {
			r, err := procMemory(c.Pid())
			if err != nil {
				t.Fatal(err)
			}
			m.rss, m.file = max(m.rss, r.rss), max(m.file, r.file)
			time.Sleep(time.Second)
		}
		s.rss, s.file = append(s.rss, m.rss), append(s.file, m.file)
	}
	t.Logf("N=%d round %d, %d replicas: last copy after %s; CPU %s; RSS %s (of it mapped files' pages %s); shared watches rebuilt in the window %v",
		l.n, round, replicas, s.last.Round(time.Millisecond), durationsOf(s.cpu), mibsOf(s.rss), mibsOf(s.file), s.rebuilds)
	return s
}

// profile starts, with COURIER_BENCH_PROFILE and in the first round only,
// a CPU profile of each running replica over the change of every source
// (scaleout-<replicas>-<i>.pprof, i numbering the replicas); the returned
// function waits for them and saves each replica's heap profile beside
// them. Without a non-delivering replica's profile the per-replica floor
// (what every replica pays whichever Clusters it holds) cannot be read.
func (so *scaleOut) profile(round, replicas int) func() {
	if profileDir() == "" || round != 1 {
		return func() {}
	}
	d := profileSeconds(so.t)
	var wg sync.WaitGroup
	for i, c := range so.running {
		name := fmt.Sprintf("scaleout-%d-%d", replicas, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds()))
			if err := saveProfileFrom(c.Config, path, filepath.Join(profileDir(), name+".pprof"), d+time.Minute); err != nil {
				so.t.Logf("CPU profile %s: %v", name, err)
			}
		}()
	}
	return func() {
		wg.Wait()
		for i, c := range so.running {
			name := fmt.Sprintf("scaleout-%d-%d.heap.pprof", replicas, i)
			if err := saveProfileFrom(c.Config, "/debug/pprof/heap", filepath.Join(profileDir(), name), time.Minute); err != nil {
				so.t.Logf("heap profile %s: %v", name, err)
			}
		}
	}
}

// cpu returns each running replica's CPU time so far.
func (so *scaleOut) cpu() []time.Duration {
	out := make([]time.Duration, len(so.running))
	for i, c := range so.running {
		out[i] = mustCPU(so.t, c.Pid())
	}
	return out
}

// countWrites counts, for each sample, Courier's accepted writes into the
// scale case's destination namespaces that the downstream kube-apiservers
// received within the sample's window.
func (so *scaleOut) countWrites(res scaleOutResult) {
	var all []fleetsim.Write
	for _, ds := range env.Downstreams {
		writes, err := fleetsim.CourierWrites(ds.AuditLog)
		if err != nil {
			so.t.Fatal(err)
		}
		all = append(all, writes...)
	}
	prefix := fmt.Sprintf("bench-%d-c", so.l.n)
	for _, samples := range res.samples {
		for i := range samples {
			s := &samples[i]
			for _, w := range all {
				if w.Accepted() && strings.HasPrefix(w.Namespace, prefix) && !w.Received.Before(s.t0) && w.Received.Before(s.end) {
					s.writes++
				}
			}
		}
	}
}

// benchCourierArgs are the flags the suite's Courier was started with
// besides localenv's (main_test.go).
func benchCourierArgs() []string { return strings.Fields(os.Getenv("COURIER_BENCH_ARGS")) }

func durationsOf(d []time.Duration) string {
	var out []string
	for _, x := range d {
		out = append(out, x.Round(10*time.Millisecond).String())
	}
	return strings.Join(out, ", ")
}

func mibsOf(b []int64) string {
	var out []string
	for _, x := range b {
		out = append(out, fmt.Sprintf("%.0f MiB", float64(x)/(1<<20)))
	}
	return strings.Join(out, ", ")
}

// perReplicaMax is, over samples, the median of each sample's largest
// per-replica value: the busiest replica is what a replica must be sized
// for.
func perReplicaMax[T int64 | time.Duration](samples []scaleOutSample, of func(scaleOutSample) []T) float64 {
	var vals []float64
	for _, s := range samples {
		vals = append(vals, float64(slices.Max(of(s))))
	}
	return median(vals)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// printScaleOut writes the scale-out table: per figure, one replica's
// value, the busiest of the three's, the ratio, the target and the
// verdict (medians over the rounds).
func printScaleOut(w io.Writer, rows []scaleOutResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scale-out, one change of every source\t1 replica\t%d replicas (busiest)\tratio\ttarget\tverdict\n", scaleOutReplicas)
	for _, r := range rows {
		one, many := r.samples[1], r.samples[scaleOutReplicas]
		cpu := func(s scaleOutSample) []time.Duration { return s.cpu }
		rss := func(s scaleOutSample) []int64 { return s.rss }
		c1, c3 := perReplicaMax(one, cpu), perReplicaMax(many, cpu)
		m1, m3 := perReplicaMax(one, rss), perReplicaMax(many, rss)
		var l1, l3, w1, w3 []float64
		for _, s := range one {
			l1, w1 = append(l1, float64(s.last)), append(w1, float64(s.writes))
		}
		for _, s := range many {
			l3, w3 = append(l3, float64(s.last)), append(w3, float64(s.writes))
		}
		fmt.Fprintf(tw, "N=%d: CPU per replica\t%s\t%s\t%s\t<= %.2f\t%s\n", r.n, time.Duration(c1).Round(10*time.Millisecond),
			time.Duration(c3).Round(10*time.Millisecond), ratioAgainst(c3, c1, scaleOutShareTarget), scaleOutShareTarget, verdict(c1 > 0 && c3/c1 <= scaleOutShareTarget))
		fmt.Fprintf(tw, "N=%d: RSS per replica\t%.0f MiB\t%.0f MiB\t%s\t<= %.2f\t%s\n", r.n, m1/(1<<20), m3/(1<<20), ratioAgainst(m3, m1, scaleOutShareTarget),
			scaleOutShareTarget, verdict(m1 > 0 && m3/m1 <= scaleOutShareTarget))
		fmt.Fprintf(tw, "N=%d: time to the last copy\t%s\t%s\t%s\t<= %.2f\t%s\n", r.n, time.Duration(median(l1)).Round(time.Millisecond),
			time.Duration(median(l3)).Round(time.Millisecond), ratioAgainst(median(l3), median(l1), scaleOutTimeTarget), scaleOutTimeTarget,
			verdict(median(l1) > 0 && median(l3)/median(l1) <= scaleOutTimeTarget))
		fmt.Fprintf(tw, "N=%d: downstream writes (all replicas)\t%.0f\t%.0f\t%s\t= %d\t%s\n", r.n, median(w1), median(w3), ratio(median(w3), median(w1)),
			r.n*sourcesPerOp, verdict(slices.Max(w1) == float64(r.n*sourcesPerOp) && slices.Max(w3) == float64(r.n*sourcesPerOp) &&
				slices.Min(w1) == float64(r.n*sourcesPerOp) && slices.Min(w3) == float64(r.n*sourcesPerOp)))
	}
	tw.Flush()
	for _, r := range rows {
		one, many := r.samples[1], r.samples[scaleOutReplicas]
		file := func(s scaleOutSample) []int64 { return s.file }
		anon := func(s scaleOutSample) []int64 {
			var out []int64
			for i := range s.rss {
				out = append(out, s.rss[i]-s.file[i])
			}
			return out
		}
		f1, f3 := perReplicaMax(one, file), perReplicaMax(many, file)
		a1, a3 := perReplicaMax(one, anon), perReplicaMax(many, anon)
		fmt.Fprintf(w, "N=%d: of RSS per replica, pages of mapped files (RssFile: Courier's binary, as much on a replica holding nothing) "+
			"%.0f and %.0f MiB; the rest %.0f and %.0f MiB (%s)\n", r.n, f1/(1<<20), f3/(1<<20), a1/(1<<20), a3/(1<<20), ratio(a3, a1))
	}
}

func (r *report) addScaleOut(res scaleOutResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scaleOut = append(r.scaleOut, res)
}
