package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/courier-dev/courier/test/localenv"
)

// pullReplicas is COURIER_BENCH_PULL_REPLICAS, default 2 (the Deployment
// and the chart run two): the Courier replicas the pull row runs against.
func pullReplicas(t *testing.T) int {
	return intsFromEnv(t, "COURIER_BENCH_PULL_REPLICAS", []int{2})[0]
}

// replicaSet is the Courier replicas of the pull row, behind the
// aggregator (through localenv's Balancer, playing their Service, when
// there are several).
type replicaSet struct {
	rs []*localenv.Courier
	lb *localenv.Balancer // nil with one replica
}

// service is what the Balancer did to connections so far (zero without one).
func (s *replicaSet) service() localenv.BalancerStats {
	if s.lb == nil {
		return localenv.BalancerStats{}
	}
	return s.lb.Stats()
}

// startPullReplicas replaces the suite's Courier with n replicas (n > 1)
// for the pull row; the returned function puts it back. While they run,
// the suite's courier variable names the first replica, which the
// profiles are taken from.
func startPullReplicas(t *testing.T, ctx context.Context, n int) (*replicaSet, func()) {
	t.Helper()
	if n <= 1 {
		return &replicaSet{rs: []*localenv.Courier{courier}}, func() {}
	}
	saved := courier
	restore := func() {
		courier = saved
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := saved.Start(rctx); err != nil {
			t.Errorf("starting the suite's Courier again: %v", err)
		}
	}
	saved.Stop()
	rs, lb, err := env.StartCourierReplicas(ctx, localenv.CourierOptions{Binary: saved.Binary(),
		Args: strings.Fields(os.Getenv("COURIER_BENCH_ARGS"))}, n)
	if err != nil {
		restore()
		t.Fatalf("starting %d Courier replicas: %v", n, err)
	}
	courier = rs[0]
	return &replicaSet{rs: rs, lb: lb}, func() {
		for _, r := range rs {
			r.Stop()
		}
		lb.Close()
		restore()
	}
}

// cpu is the CPU time of the replicas' running processes, added up.
func (s *replicaSet) cpu(t *testing.T, except int) time.Duration {
	var total time.Duration
	for i, r := range s.rs {
		if i != except {
			total += mustCPU(t, r.Pid())
		}
	}
	return total
}

func (s *replicaSet) waitIdle(t *testing.T) {
	for _, r := range s.rs {
		waitIdle(t, r.Pid(), time.Minute)
	}
}

// rss returns the largest and the summed resident memory of the replicas.
func (s *replicaSet) rss(t *testing.T, ctx context.Context, sample bool) (largest, total int64) {
	for _, r := range s.rs {
		var b int64
		if sample {
			b, _ = sampleMemory(t, ctx, r.Pid(), 5, 200*time.Millisecond)
		} else {
			b, _ = rssBytes(r.Pid())
		}
		largest, total = max(largest, b), total+b
	}
	return largest, total
}

// sum adds f over every replica's /metrics except the one at except.
func (s *replicaSet) sum(t *testing.T, ctx context.Context, except int, f func(metrics) float64) float64 {
	t.Helper()
	var total float64
	for i, r := range s.rs {
		if i == except {
			continue
		}
		m, err := scrapeFrom(ctx, r.Config)
		if err != nil {
			t.Fatalf("%s's /metrics: %v", r.Name(), err)
		}
		total += f(m)
	}
	return total
}

// runtimeNote says, per replica, how many agents' watches it serves and
// what its Go runtime holds.
func (s *replicaSet) runtimeNote(ctx context.Context) string {
	var parts []string
	for _, r := range s.rs {
		m, err := scrapeFrom(ctx, r.Config)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", r.Name(), err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %.0f watches, %.0f goroutines, stacks %.0f MiB, heap in use %.0f MiB, watch setups since its start %.0f (%.0f refused after waiting for a slot)",
			r.Name(), m.sum("apiserver_longrunning_requests", `resource="downstreamcopies"`, `verb="WATCH"`)+m.sum("courier_agent_watches"), m.sum("go_goroutines"),
			m.sum("go_memstats_stack_inuse_bytes")/(1<<20), m.sum("go_memstats_heap_inuse_bytes")/(1<<20),
			m.sum("courier_watch_setups_total"), m.sum("courier_watch_setups_refused_total")))
	}
	return strings.Join(parts, "; ")
}

// restartStep is one replica's restart in a rolling restart with every
// agent connected.
type restartStep struct {
	replica        string
	exitedOnItsOwn bool
	stopTook       time.Duration // SIGTERM to the old process gone
	readyAfter     time.Duration // SIGTERM to the new process ready and Available
	ok             bool          // every agent watched again
	allAfter       time.Duration // SIGTERM to every agent that lost its watch watching again
	reconnecting   int           // agents whose watch ended in the step
	cpu            time.Duration // the new process's CPU since its start, plus the other replicas' in the step
	newCPU         time.Duration // of cpu, the new process's
	payloadCounter float64       // payload GETs in the step, by Courier's counters
	payloadAgents  int64         // by the agents' own count
	openErrors     int64
	gone           int64
}

// restartReplica restarts replica k (SIGTERM, then a new process, as a
// rolling restart does) with every agent connected and waits until every
// agent whose watch it ended watches again.
func restartReplica(t *testing.T, ctx context.Context, s *replicaSet, k int, f *agentFleet) restartStep {
	t.Helper()
	r := s.rs[k]
	st := restartStep{replica: r.Name()}
	ends0 := make([]int64, len(f.agents))
	for i, a := range f.agents {
		ends0[i] = a.ends.Load()
	}
	oc0, om0 := s.cpu(t, k), s.sum(t, ctx, k, payloadReads)
	e0, g0, r0 := f.openErrors.Load(), f.gone.Load(), f.payloadReads.Load()
	t0 := time.Now()
	st.exitedOnItsOwn = r.Stop()
	tExit := time.Now()
	st.stopTook = tExit.Sub(t0)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := r.Start(sctx); err != nil {
		t.Fatalf("restarting %s: %v", r.Name(), err)
	}
	st.readyAfter = time.Since(t0)
	stopProfile := func() {}
	if k == 0 {
		stopProfile = startCPUProfile(t, fmt.Sprintf("cpu-pull-%d-reconnect.pprof", len(f.agents)), profileSeconds(t))
	}
	defer stopProfile()
	st.ok = waitFor(5*time.Minute, func() bool {
		return time.Since(tExit) > time.Second && int(f.watching.Load()) == len(f.agents)
	})
	if !st.ok {
		t.Errorf("%d of %d agents watching 5 minutes after %s restarted", f.watching.Load(), len(f.agents), r.Name())
	}
	var last int64
	for i, a := range f.agents {
		if a.ends.Load() > ends0[i] {
			st.reconnecting++
			last = max(last, a.watchingAt.Load())
		}
	}
	st.allAfter = time.Unix(0, last).Sub(t0)
	st.newCPU = mustCPU(t, r.Pid())
	st.cpu = st.newCPU + s.cpu(t, k) - oc0
	st.openErrors, st.gone = f.openErrors.Load()-e0, f.gone.Load()-g0
	time.Sleep(2 * time.Second) // payload reads of rows already received
	st.payloadAgents = f.payloadReads.Load() - r0
	m, err := scrapeFrom(ctx, r.Config)
	if err != nil {
		t.Fatal(err)
	}
	st.payloadCounter = payloadReads(m) + s.sum(t, ctx, k, payloadReads) - om0
	return st
}
