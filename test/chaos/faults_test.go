package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
)

const (
	// downFor is how long scenario 2 keeps a downstream kube-apiserver down.
	downFor = 60 * time.Second
	// unreachableWithin and currentWithin are scenario 2's conditions.
	unreachableWithin = 15 * time.Second
	// currentWithin is what a user waits for a cluster that answers again:
	// its copies current and its rows Synced (docs/reliability.md).
	currentWithin = 5 * time.Second
	// backWithin only turns a hang into an error.
	backWithin = 2 * time.Minute
	// answersWithin and restWithin are scenario 3's: Courier answers
	// again soon after the upstream does, and the copies still missing
	// then arrive within what a fan-out of them takes (docs/reliability.md).
	answersWithin = 5 * time.Second
	restWithin    = 30 * time.Second
	// etcdPausedFor is how long scenario 3 keeps etcd stopped.
	etcdPausedFor = 20 * time.Second
)

// testDownstreamDown is scenario 2: a fan-out without a fault, then one
// with downstream-2's kube-apiserver stopped for downFor. The Clusters on
// downstream-1 must get all their copies while downstream-2 is down (their
// times beside the run without the fault), the rows of the Clusters on
// downstream-2 must turn Unreachable within 15 s, and their copies must be
// current and their rows Synced within 5 s after it is back, each figure
// timed on its own from the same instant (timeBack).
func testDownstreamDown(t *testing.T, f *fleetRun) {
	ctx := context.Background()
	stopped := len(env.Downstreams) - 1
	onStopped := func(i int) bool { return f.downstreamOf(i) == stopped }
	onOthers := func(i int) bool { return f.downstreamOf(i) != stopped }

	t0 := f.change(t, "calm")
	calm := f.converge(t, "calm", t0)
	calmOthers := latenciesOf(f, calm, onOthers)

	ds := env.Downstreams[stopped]
	ds.Stop()
	down := time.Now()
	t0 = f.change(t, "storm")
	othersDone := make(chan []time.Duration, 1)
	othersErr := make(chan error, 1)
	go func() {
		lat, err := f.w.Wait(f.keys("storm", onOthers), t0, time.Until(down.Add(downFor)))
		othersErr <- err
		othersDone <- lat
	}()

	stoppedRows := map[string]bool{}
	for i := 1; i <= f.n; i++ {
		if onStopped(i) {
			stoppedRows[clusterName(i)] = true
		}
	}
	unreachable, last := f.waitRows(t, stoppedRows, courierv1alpha1.CopyPhaseUnreachable, downFor-5*time.Second)
	results.add(t, "2 downstream down", fmt.Sprintf("rows of the %d Clusters on %s Unreachable after its stop", len(stoppedRows), ds.Name),
		durationOr(unreachable, "not within "+(downFor-5*time.Second).String()+": "+last), "<= "+unreachableWithin.String(), unreachable > 0 && unreachable <= unreachableWithin)

	othersFailed := <-othersErr
	storm := <-othersDone
	results.add(t, "2 downstream down", fmt.Sprintf("copies to the %d Clusters on the other kube-apiserver while %s was down", f.n-len(stoppedRows), ds.Name),
		errOr(othersFailed, fmt.Sprintf("all %d", len(f.keys("storm", onOthers)))), "all, before it returns", othersFailed == nil)
	if othersFailed == nil {
		results.add(t, "2 downstream down", "their last copy / median, with the fault vs without",
			fmt.Sprintf("%s / %s vs %s / %s", ms(fleetsim.MaxDuration(storm)), ms(fleetsim.Percentile(storm, 50)), ms(fleetsim.MaxDuration(calmOthers)), ms(fleetsim.Percentile(calmOthers, 50))), "", true)
	}

	// The fault lasts downFor: this waits out its duration, it judges nothing.
	time.Sleep(time.Until(down.Add(downFor)))
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err := ds.Start(sctx)
	cancel()
	if err != nil {
		t.Fatalf("starting %s again: %v", ds.Name, err)
	}
	back := f.timeBack(t, stopped, stoppedRows, "storm")
	for _, fig := range back {
		results.add(t, "2 downstream down", fmt.Sprintf("%s's %s after it is back", ds.Name, fig.what),
			durationOr(fig.took, "not within "+backWithin.String()+": "+fig.last), "<= "+currentWithin.String(), fig.took > 0 && fig.took <= currentWithin)
	}
	// Every copy by watch (the other Clusters' arrivals were taken by the
	// wait above when it succeeded) and every row.
	rest := f.keys("storm", nil)
	if othersFailed == nil {
		rest = f.keys("storm", onStopped)
	}
	if _, err := f.w.Wait(rest, t0, f.budget()); err != nil {
		t.Fatal(err)
	}
	if err := f.waitSynced(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitRows polls the fleet HelmOp's rows until every row of the named
// Clusters has phase, and returns how long that took (0 on timeout) and
// the last count seen. The guard HelmOp's rows (guard_test.go) are
// Conflict by design and not looked at.
func (f *fleetRun) waitRows(t *testing.T, clusters map[string]bool, phase courierv1alpha1.CopyPhase, timeout time.Duration) (time.Duration, string) {
	t.Helper()
	return waitRowsOf(f.fc, clusters, phase, timeout)
}

// waitRowsOf is waitRows reading the rows through fc: through the
// aggregator, or from one replica directly.
func waitRowsOf(fc versioned.Interface, clusters map[string]bool, phase courierv1alpha1.CopyPhase, timeout time.Duration) (time.Duration, string) {
	began := time.Now()
	last := "no list yet"
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := fc.CourierV1alpha1().DownstreamCopies(workspace).List(ctx, metav1.ListOptions{LabelSelector: fleetRows})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		want, have := 0, 0
		other := map[courierv1alpha1.CopyPhase]int{}
		for _, r := range list.Items {
			if !clusters[r.Spec.Cluster] {
				continue
			}
			want++
			if r.Status.Phase == phase {
				have++
			} else {
				other[r.Status.Phase]++
			}
		}
		last = fmt.Sprintf("%d of %d rows %s, others %v", have, want, phase, other)
		return want > 0 && have == want, nil
	})
	if err != nil {
		return 0, last
	}
	return time.Since(began), last
}

// waitCurrent polls downstream d until every listed copy of the Clusters
// on it holds value, and returns how long that took (0 on timeout) and
// the last count seen. It lists rather than watches: a watch of a
// kube-apiserver that was down reconnects with its own backoff, which
// would be measured instead.
func (f *fleetRun) waitCurrent(t *testing.T, downstreamOf func(int) int, d int, value string, timeout time.Duration) (time.Duration, string) {
	t.Helper()
	want := map[string]bool{}
	for i := 1; i <= f.n; i++ {
		if downstreamOf(i) == d {
			for _, name := range f.listed {
				want[dest(i)+"/"+name] = true
			}
		}
	}
	began := time.Now()
	last := "no list yet"
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := f.down[d].CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: chaosLabel + "=copy"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		have := 0
		for _, s := range list.Items {
			if want[s.Namespace+"/"+s.Name] && string(s.Data[roundKey]) == value {
				have++
			}
		}
		last = fmt.Sprintf("%d of %d copies hold %s", have, len(want), value)
		return have == len(want), nil
	})
	if err != nil {
		return 0, last
	}
	return time.Since(began), last
}

// testUpstreamRestart is scenario 3a: the upstream kube-apiserver stopped
// and started again during a fan-out.
func testUpstreamRestart(t *testing.T, f *fleetRun) {
	ctx := context.Background()
	f.hurtUpstream(t, "3 upstream restarted", "upstream", func() {
		env.Upstream.Stop()
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := env.Upstream.Start(sctx); err != nil {
			t.Fatalf("starting the upstream kube-apiserver again: %v", err)
		}
	})
}

// testEtcdPaused is scenario 3b: etcd stopped with SIGSTOP for
// etcdPausedFor during a fan-out, then resumed.
func testEtcdPaused(t *testing.T, f *fleetRun) {
	f.hurtUpstream(t, "3 etcd paused", "etcd", func() {
		if err := env.SignalEtcd(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// The fault lasts etcdPausedFor: this sleep is its duration.
		time.Sleep(etcdPausedFor)
		if err := env.SignalEtcd(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	})
}

// hurtUpstream changes every source, runs fault once some but not all of
// the new copies arrived (so the fault lands mid fan-out, and the table
// shows it), and then checks that Courier kept its pid, answers again
// (itself and through the aggregator) and that every copy converges. It
// reports the recovery as the sum it is: the fault itself, then Courier
// answering again, then the rest of the copies.
func (f *fleetRun) hurtUpstream(t *testing.T, scenario, value string, fault func()) {
	t.Helper()
	pid := courier.Pid()
	total := f.n * len(f.listed)
	threshold := total/10 + rand.IntN(total/3)
	var mu sync.Mutex
	count := 0
	fired := make(chan struct{})
	var once sync.Once
	f.w.OnArrival(func(k fleetsim.ArrivalKey) {
		if k.Value != value || !strings.HasPrefix(k.NS, "chaos-c") {
			return
		}
		mu.Lock()
		count++
		n := count
		mu.Unlock()
		if n >= threshold {
			once.Do(func() { close(fired) })
		}
	})
	t0 := f.change(t, value)
	select {
	case <-fired:
	case <-time.After(f.budget()):
		t.Fatalf("%s: never %d of %d copies within %s\n%s", scenario, threshold, total, f.budget(), fleetsim.RowsSummary(f.fc, workspace))
	}
	mu.Lock()
	atFault := count
	mu.Unlock()
	began := time.Now()
	fault()
	ended := time.Now()
	f.w.OnArrival(nil)
	results.add(t, scenario, "copies current when the fault began", fmt.Sprintf("%d of %d", atFault, total), "some, not all", atFault > 0 && atFault < total)
	answers := courierAnswers(t, f)
	results.add(t, scenario, "Courier's /readyz and a list of downstreamcopies through the aggregator answer after the fault",
		durationOr(answers, "not within 3m"), "<= "+answersWithin.String(), answers > 0 && answers <= answersWithin)
	lat := f.converge(t, value, t0)
	last := t0.Add(fleetsim.MaxDuration(lat))
	results.add(t, scenario, fmt.Sprintf("every copy current and every row Synced (%d); last copy after the change", len(lat)),
		fleetsim.MaxDuration(lat).Round(100*time.Millisecond).String(), "all", true)
	// Recovery is the sum of three waits: the fault itself, Courier
	// answering again after it, and the copies still missing then (none
	// when the fan-out finished from Courier's caches during the fault).
	answered := ended.Add(answers)
	rest := max(last.Sub(answered), 0)
	results.add(t, scenario, "recovery: the fault + Courier answering again + the copies still missing then = from the fault's start",
		fmt.Sprintf("%s + %s + %s = %s (last copy %s after the fault began)", ms(ended.Sub(began)), ms(answers), ms(rest),
			ms(answered.Add(rest).Sub(began)), ms(last.Sub(began))), "the rest <= "+restWithin.String(), rest <= restWithin)
	now := courier.Pid()
	results.add(t, scenario, "Courier's pid before / after", fmt.Sprintf("%d / %d", pid, now), "same, running", pid != 0 && now == pid)
}

// courierAnswers polls Courier's /readyz (directly) and a list of
// downstreamcopies through the upstream aggregator until both succeed,
// and returns how long that took (0 on timeout).
func courierAnswers(t *testing.T, f *fleetRun) time.Duration {
	t.Helper()
	hc, err := rest.HTTPClientFor(courier.Config)
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 5 * time.Second
	began := time.Now()
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := hc.Get(courier.Config.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		_, err = f.fc.CourierV1alpha1().DownstreamCopies(workspace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		return 0
	}
	return time.Since(began)
}

// latenciesOf picks, from the latencies of f.keys(value, nil), those of the
// Clusters on selects.
func latenciesOf(f *fleetRun, lat []time.Duration, on func(int) bool) []time.Duration {
	var out []time.Duration
	k := 0
	for i := 1; i <= f.n; i++ {
		for range f.listed {
			if on(i) {
				out = append(out, lat[k])
			}
			k++
		}
	}
	return out
}

func ms(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }

func durationOr(d time.Duration, otherwise string) string {
	if d == 0 {
		return otherwise
	}
	return d.Round(100 * time.Millisecond).String()
}

func errOr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}
