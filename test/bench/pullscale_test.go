package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	courierapi "github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
	"github.com/courier-dev/courier/test/localenv"
)

// pullResult is the pull row (issues 12 and 27): N simulated agents, each
// its own user through Courier's agent authorizer.
type pullResult struct {
	agents, replicas int
	flowSchema       bool   // artifacts/flowcontrol's FlowSchema was applied upstream
	decode           string // how the simulated agents decoded their events (pullDecode)

	// first connect
	connect          time.Duration // from the first watch opened to every agent watching
	connectCPU       time.Duration // Courier's CPU over that span
	connectErrors    int64
	connectLastError string                 // the last of them
	connectService   localenv.BalancerStats // the Service (localenv's Balancer) over the connect
	connectCodes     string                 // connectErrors by HTTP status
	connectUpstream  string                 // the upstream's APIService unavailability over the connect
	rssBefore        int64                  // Courier's RSS before any agent connected, all replicas
	rssWatching      int64                  // with every agent watching, idle: the largest replica
	rssWatchingTotal int64                  // all replicas

	// source changes, one after another: the median by p99, and each
	received       int
	p50, p99, last time.Duration
	changeCPU      time.Duration // per change, all replicas
	changes        []changeResult
	probeReads     float64 // Courier's payload counter after one agent read its payload

	// upstream writes with everything current
	interval                time.Duration // the agents' report interval
	window                  time.Duration
	writes                  float64 // upstream writes in the window
	writesBy                string
	reportsSent, reportsBad int64
	warmup                  time.Duration // heartbeats before the window
	reportWrites            float64       // Courier's report writes in the window
	reviews                 float64       // SubjectAccessReviews the upstream answered in the window
	hbP50, hbP99            time.Duration // a heartbeat's request time in the window
	flowControl             string        // the upstream's priority and fairness in the window
	windowCPU               time.Duration // Courier's CPU in the window, all replicas
	runtimeNote             string        // Courier's Go runtime with every agent watching

	// rolling restart, one step per replica
	steps    []restartStep
	rssAfter int64 // the largest replica after it
}

// pullOpens is COURIER_BENCH_PULL_OPENS, default 64: how many of the
// simulated agents' watch opens may be in flight at once.
func pullOpens(t *testing.T, agents int) int {
	return max(1, min(agents, intsFromEnv(t, "COURIER_BENCH_PULL_OPENS", []int{64})[0]))
}

// pullAgents is COURIER_BENCH_PULL, default 10,000.
func pullAgents(t *testing.T) int {
	return intsFromEnv(t, "COURIER_BENCH_PULL", []int{10000})[0]
}

// testPull measures pull delivery at edge scale: N pulled
// Clusters, each with its own agent user bound to courier:agent and one
// row; N simulated agents (agentFleet) that hold one filtered watch each
// through the aggregator as their own user, then one source change, the
// upstream writes while every agent heartbeats with everything current,
// and a restart of Courier with every agent connected.
func testPull(t *testing.T) {
	n := pullAgents(t)
	ctx := context.Background()
	up := fastUpstream(t)
	fc := agentsClient(t)
	const ws = "bench-pull-ws"
	name := func(i int) string { return fmt.Sprintf("a%d", i) }
	set, restore := startPullReplicas(t, ctx, pullReplicas(t))
	defer restore()
	flowSchema, removeFlowSchema := applyAgentFlowSchema(t, ctx, up)
	defer removeFlowSchema()
	srcRV := setupPull(t, ctx, up, fc, ws, n, name)
	defer func() {
		_ = fc.FleetV1alpha1().HelmOps(ws).Delete(ctx, "pull", metav1.DeleteOptions{})
		_ = up.CoreV1().Namespaces().Delete(ctx, ws, metav1.DeleteOptions{})
		waitNamespaceGone(t, up, ws)
	}()
	set.waitIdle(t)
	agentsRefused(t, ctx, fc, ws, name)
	set.waitIdle(t)

	res := pullResult{agents: n, replicas: len(set.rs), flowSchema: flowSchema, decode: pullDecode()}
	// The agents start with their copies made from the source as it is:
	// as after an earlier run, so connecting reads no payload.
	f := newAgentFleet(fc, ws, n, name, srcRV, pullOpens(t, n))
	runCtx, stop := context.WithCancel(ctx)
	var wg *sync.WaitGroup
	defer func() {
		stop()
		if wg != nil {
			wg.Wait()
		}
	}()
	_, res.rssBefore = set.rss(t, ctx, false)
	up0, err := scrapeFrom(ctx, env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	c0, t0, svc0 := set.cpu(t, -1), time.Now(), set.service()
	stopProfile := startCPUProfile(t, fmt.Sprintf("cpu-pull-%d-connect.pprof", n), profileSeconds(t))
	wg = f.start(runCtx)
	if !waitFor(10*time.Minute, func() bool { return f.allWatchingSince(t0) }) {
		t.Fatalf("%d of %d agents watching after 10 minutes (%d watch opens failed, the last with: %v)", f.watching.Load(), n, f.openErrors.Load(), f.lastOpenErr.Load())
	}
	res.connect, res.connectCPU, res.connectErrors = f.lastWatching().Sub(t0), set.cpu(t, -1)-c0, f.openErrors.Load()
	svc := set.service()
	res.connectService = localenv.BalancerStats{Dropped: svc.Dropped - svc0.Dropped, Unready: svc.Unready - svc0.Unready}
	up1, err := scrapeFrom(ctx, env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	res.connectUpstream = apiServiceUnavailable(up0, up1)
	if e, ok := f.lastOpenErr.Load().(string); ok && res.connectErrors > 0 {
		res.connectLastError, res.connectCodes = e, f.openErrorCodes()
	}
	stopProfile()
	set.waitIdle(t)
	res.rssWatching, res.rssWatchingTotal = set.rss(t, ctx, true)
	set.saveHeapProfiles(t, fmt.Sprintf("heap-pull-%d", n))
	res.runtimeNote = set.runtimeNote(ctx)

	pullChange(t, ctx, up, set, f, ws, &res)
	set.waitIdle(t)
	pullWrites(t, ctx, set, f, &res)
	set.waitIdle(t)
	f.readPayloads.Store(true)
	for k := range set.rs {
		res.steps = append(res.steps, restartReplica(t, ctx, set, k, f))
		set.waitIdle(t)
	}
	res.rssAfter, _ = set.rss(t, ctx, true)
	results.addPull(res)
}

// agentsDials bounds the connections the simulated agents' client dials
// at once. Go's HTTP transport dials a connection for every request that
// finds its HTTP/2 connections full, and shares each new one with every
// request waiting; unbounded, 10,000 watches opened in one instant dialed
// until this process ran out of file descriptors (20,000 here), failing
// thousands of opens before they reached the upstream. Real agents are
// separate processes with a connection each; the bound keeps the
// benchmark's own limits out of the figures.
const agentsDials = 32

// agentsClient is the simulated agents' client: the upstream admin's,
// without a client-side rate limit (the agents are N processes), and with
// at most agentsDials connections being dialed at once.
func agentsClient(t *testing.T) versioned.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Upstream.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 0
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: tlsConfig, MaxConnsPerHost: agentsDials})
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Transport = tr
	fc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

// setupPull creates ws with the source s0, n pulled Clusters, their
// agents' RoleBinding and one HelmOp copying s0 to all of them, waits for
// the n rows, and returns s0's resourceVersion.
func setupPull(t *testing.T, ctx context.Context, up kubernetes.Interface, fc versioned.Interface, ws string, n int, name func(int) string) string {
	t.Helper()
	if _, err := up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := up.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s0"},
		Data: map[string][]byte{"round": []byte("0")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = fleetsim.Parallel(n, 4*setupWorkers, func(i int) error {
		_, err := fc.FleetV1alpha1().Clusters(ws).Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name(i + 1),
			Annotations: map[string]string{courierapi.AnnotationAgentUser: agentUser(name(i + 1))}}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	bindAgents(t, ctx, up, ws)
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "pull"}}
	op.Spec.DownstreamResources = []fleet.DownstreamResource{{Kind: "Secret", Name: "s0"}}
	for i := 1; i <= n; i++ {
		op.Spec.Targets = append(op.Spec.Targets, fleet.BundleTarget{ClusterName: name(i),
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "bench-pull"}})
	}
	if _, err := fc.FleetV1alpha1().HelmOps(ws).Create(ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitRows(ctx, fc, ws, n); err != nil {
		t.Fatal(err)
	}
	return src.ResourceVersion
}

// changeResult is one source change's arrival at the agents' watches.
type changeResult struct {
	received       int
	p50, p99, last time.Duration
}

// pullChange changes the source and times its arrival at every agent's
// watch. One agent then reads its payload, and Courier's counter of
// payload GETs must show it: the counter the restart is judged by counts.
func pullChange(t *testing.T, ctx context.Context, up kubernetes.Interface, set *replicaSet, f *agentFleet, ws string, res *pullResult) {
	t.Helper()
	n := len(f.agents)
	// One change is one sample of a noisy machine: the figure is the
	// median of several changes' p99, each change after the last arrived.
	changes := intsFromEnv(t, "COURIER_BENCH_PULL_CHANGES", []int{5})[0]
	var all []changeResult
	c0 := set.cpu(t, -1)
	for i := range max(changes, 1) {
		arrived := changeSource(t, ctx, up, f, ws, strconv.Itoa(i+1))
		c := changeResult{received: len(arrived)}
		if len(arrived) > 0 {
			c.p50, c.p99, c.last = fleetsim.Percentile(arrived, 50), fleetsim.Percentile(arrived, 99), fleetsim.MaxDuration(arrived)
		}
		if c.received < n {
			t.Errorf("%d of %d agents' watches saw source change %d within 5 minutes", c.received, n, i+1)
		}
		all = append(all, c)
	}
	res.changeCPU = (set.cpu(t, -1) - c0) / time.Duration(len(all))
	res.changes = all
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b changeResult) int { return cmp.Compare(a.p99, b.p99) })
	med := sorted[len(sorted)/2]
	res.received, res.p50, res.p99, res.last = med.received, med.p50, med.p99, med.last
	res.probeReads = probePayload(t, ctx, set, f)
	if profileDir() == "" {
		return
	}
	// A few changes are too little CPU for a profile's samples: profile
	// more, one after another, outside the figures.
	name := fmt.Sprintf("cpu-pull-%d-change", n)
	stopProfiles := startCPUProfile(t, name+".pprof", profileSeconds(t))
	stopBench := startBenchProfile(t, name+"-bench.pprof")
	c1, rounds, deadline := set.cpu(t, -1), 0, time.Now().Add(profileSeconds(t))
	var p99s []string
	for ; time.Now().Before(deadline); rounds++ {
		arrived := changeSource(t, ctx, up, f, ws, "p"+strconv.Itoa(rounds))
		if len(arrived) > 0 {
			p99s = append(p99s, ms(fleetsim.Percentile(arrived, 99)))
		}
	}
	cpu := set.cpu(t, -1) - c1
	stopBench()
	stopProfiles()
	t.Logf("profiled source changes: %d, Courier CPU per change %s (all replicas), p99 of each: %s", rounds, ms(cpu/time.Duration(max(rounds, 1))), strings.Join(p99s, ", "))
}

// changeSource sets the source's data to round and returns, for each agent
// whose watch received its row with the new source resourceVersion within
// 5 minutes, how long after the update.
func changeSource(t *testing.T, ctx context.Context, up kubernetes.Interface, f *agentFleet, ws, round string) []time.Duration {
	t.Helper()
	src, err := up.CoreV1().Secrets(ws).Get(ctx, "s0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src.Data["round"] = []byte(round)
	var (
		mu      sync.Mutex
		arrived []time.Duration
		rv      string
		t0      time.Time
		known   = make(chan struct{})
	)
	fn := func(_ int, sourceRV string) {
		<-known
		if sourceRV != rv {
			return
		}
		d := time.Since(t0)
		mu.Lock()
		arrived = append(arrived, d)
		mu.Unlock()
	}
	f.arrival.Store(&fn)
	defer f.arrival.Store(nil)
	t0 = time.Now()
	updated, err := up.CoreV1().Secrets(ws).Update(ctx, src, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv = updated.ResourceVersion
	close(known)
	n := len(f.agents)
	waitFor(5*time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(arrived) == n })
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(arrived)
}

// probePayload has the first agent read its row's payload and returns
// how much Courier's payload counter rose; it must be 1.
func probePayload(t *testing.T, ctx context.Context, set *replicaSet, f *agentFleet) float64 {
	t.Helper()
	m0 := set.sum(t, ctx, -1, payloadReads)
	a := f.agents[0]
	a.mu.Lock()
	row := a.row
	a.mu.Unlock()
	if err := asAgent(f.fc.CourierV1alpha1().RESTClient().Get(), a.user).Namespace(row.Namespace).
		Resource("downstreamcopies").Name(row.Name).SubResource("payload").Do(ctx).Error(); err != nil {
		t.Fatalf("agent %s reading its payload: %v", a.user, err)
	}
	d := set.sum(t, ctx, -1, payloadReads) - m0
	if d != 1 {
		t.Errorf("Courier's payload counter rose by %v for one payload read, want 1", d)
	}
	return d
}

// payloadReads is Courier's count of GET downstreamcopies/payload.
func payloadReads(m metrics) float64 {
	return m.sum("apiserver_request_total", `resource="downstreamcopies"`, `subresource="payload"`, `verb="GET"`)
}

// pullInterval is COURIER_BENCH_PULL_REPORT_SECONDS, default 30: the
// simulated agents' report interval (the agent's default).
func pullInterval(t *testing.T) time.Duration {
	return time.Duration(intsFromEnv(t, "COURIER_BENCH_PULL_REPORT_SECONDS", []int{30})[0]) * time.Second
}

// pullWrites lets every agent heartbeat (its row Synced, once per report
// interval) for two intervals, so that first reports and liveness settle,
// then counts the upstream kube-apiserver's writes over two more.
func pullWrites(t *testing.T, ctx context.Context, set *replicaSet, f *agentFleet, res *pullResult) {
	t.Helper()
	res.interval = pullInterval(t)
	hbCtx, stop := context.WithCancel(ctx)
	defer stop()
	sent, bad, took := f.heartbeats(hbCtx, res.interval, max(64, len(f.agents)/40))
	w0 := time.Now()
	time.Sleep(res.interval)
	// Every agent has reported once: its rows' first Synced, which
	// Courier writes to the Cluster's report. Wait until those writes are
	// done (the count stands still for 6 s), and two intervals in all,
	// before counting: the figure is for everything current.
	reports := func() float64 {
		return set.sum(t, ctx, -1, func(m metrics) float64 { return m.sum("courier_agent_status_writes_total", `object="report"`) })
	}
	last, still := reports(), time.Now()
	waitFor(10*time.Minute, func() bool {
		time.Sleep(time.Second)
		if r := reports(); r != last {
			last, still = r, time.Now()
		}
		return time.Since(still) >= 6*time.Second && time.Since(w0) >= 2*res.interval
	})
	res.warmup = time.Since(w0)
	m0, err := scrapeFrom(ctx, env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, _, l0 := took.since(0)
	s0, b0, r0, c0, w1 := sent.Load(), bad.Load(), reports(), set.cpu(t, -1), time.Now()
	name := fmt.Sprintf("cpu-pull-%d-heartbeats", len(f.agents))
	stopProfiles := startCPUProfile(t, name+".pprof", min(profileSeconds(t), 2*res.interval))
	stopBench := startBenchProfile(t, name+"-bench.pprof")
	time.Sleep(2 * res.interval)
	stopBench()
	stopProfiles()
	m1, err := scrapeFrom(ctx, env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	res.window, res.windowCPU = time.Since(w1), set.cpu(t, -1)-c0
	res.hbP50, res.hbP99, _ = took.since(l0)
	res.flowControl = flowControl(m0, m1)
	res.reviews = m1.sum("apiserver_request_total", `resource="subjectaccessreviews"`) - m0.sum("apiserver_request_total", `resource="subjectaccessreviews"`)
	res.reportWrites = reports() - r0
	res.reportsSent, res.reportsBad = sent.Load()-s0, bad.Load()-b0
	res.writes, res.writesBy = upstreamWrites(m0, m1)
	if res.reportsBad > 0 {
		t.Errorf("%d of %d heartbeat reports refused or failed", res.reportsBad, res.reportsSent+res.reportsBad)
	}
}

// upstreamWrites is the upstream kube-apiserver's write requests (POST,
// PUT, PATCH, DELETE) between two scrapes, leaving out reviews (token,
// access), which store nothing, and requests it proxied to Courier; and
// the largest by resource.
func upstreamWrites(before, after metrics) (float64, string) {
	by := map[string]float64{}
	var total float64
	for series, v := range after {
		name, labels, _ := strings.Cut(series, "{")
		if name != "apiserver_request_total" {
			continue
		}
		switch label(labels, "verb") {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		resource := label(labels, "resource")
		if strings.HasSuffix(resource, "reviews") || label(labels, "group") == courierapi.GroupName {
			continue
		}
		d := v - before[series]
		if d <= 0 {
			continue
		}
		total += d
		by[label(labels, "verb")+" "+resource] += d
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]] > by[keys[j]] })
	var parts []string
	for _, k := range keys[:min(len(keys), 6)] {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, by[k]))
	}
	return total, strings.Join(parts, ", ")
}

// apiServiceUnavailable says how often, and why, the upstream's
// availability controller marked Courier's APIService unavailable between
// two scrapes: while it is, the aggregator answers every courier.dev
// request 503.
func apiServiceUnavailable(before, after metrics) string {
	by := map[string]float64{}
	for series, v := range after {
		name, labels, _ := strings.Cut(series, "{")
		if d := v - before[series]; d > 0 && name == "aggregator_unavailable_apiservice_total" && strings.Contains(label(labels, "name"), courierapi.GroupName) {
			by[label(labels, "reason")] += d
		}
	}
	keys := slices.Sorted(maps.Keys(by))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %.0f", k, by[k]))
	}
	return orNone(strings.Join(parts, ", "))
}

// flowControl says, for the upstream's priority levels that served the
// most requests between two scrapes, how many, their mean wait in the
// queue and mean execution: whether heartbeats waited for a seat.
func flowControl(before, after metrics) string {
	type level struct{ n, wait, exec float64 }
	levels := map[string]*level{}
	get := func(series string) *level {
		_, labels, _ := strings.Cut(series, "{")
		pl := label(labels, "priority_level")
		if levels[pl] == nil {
			levels[pl] = &level{}
		}
		return levels[pl]
	}
	for series, v := range after {
		d := v - before[series]
		name, _, _ := strings.Cut(series, "{")
		switch name {
		case "apiserver_flowcontrol_request_wait_duration_seconds_count":
			get(series).n += d
		case "apiserver_flowcontrol_request_wait_duration_seconds_sum":
			get(series).wait += d
		case "apiserver_flowcontrol_request_execution_seconds_sum":
			get(series).exec += d
		}
	}
	names := make([]string, 0, len(levels))
	for k, l := range levels {
		if l.n > 0 {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool { return levels[names[i]].n > levels[names[j]].n })
	var parts []string
	for _, k := range names[:min(len(names), 3)] {
		l := levels[k]
		parts = append(parts, fmt.Sprintf("%s: %.0f requests, mean wait %.0f ms, mean execution %.0f ms", k, l.n, 1000*l.wait/l.n, 1000*l.exec/l.n))
	}
	return strings.Join(parts, "; ")
}

// waitFor polls cond every 50 ms until it holds or max passes.
func waitFor(max time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(max)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// addPull records a pull row.
func (r *report) addPull(p pullResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pull = append(r.pull, p)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// printPull writes the pull figures, each with its target and
// verdict.
func printPull(w io.Writer, rows []pullResult) {
	for _, p := range rows {
		n := p.agents
		fs := "without artifacts/flowcontrol's flow control (COURIER_BENCH_PULL_FLOWSCHEMA=0)"
		if p.flowSchema {
			fs = "with artifacts/flowcontrol's flow control upstream (group " + agentGroup + " in the Limited level courier-agents, one flow per user)"
		}
		fmt.Fprintf(w, "pull: %d agents, each its own user through Courier's agent authorizer, one filtered watch each; %d Courier replica(s); %s; agents decode their events %s\n",
			n, p.replicas, fs, decodeDescription(p.decode))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "figure\ttarget\tmeasured\tverdict")
		fmt.Fprintf(tw, "first connect: every agent watching (watch-list through the aggregator)\t-\t%.1f s, %d opens refused or failed\t-\n", p.connect.Seconds(), p.connectErrors)
		if p.connectLastError != "" {
			fmt.Fprintf(tw, "  the last open refused or failed\t-\t%s\t-\n", truncate(p.connectLastError, 160))
		}
		if p.replicas > 1 {
			fmt.Fprintf(tw, "  the Service (localenv's Balancer): replicas leaving the endpoints (answered not ready, refused, or 10 s unanswered); connections closed with none ready\t-\t%d; %d\t-\n",
				p.connectService.Unready, p.connectService.Dropped)
		}
		fmt.Fprintf(tw, "Courier CPU per connecting agent (first connect, all replicas)\t-\t%.2f ms\t-\n", perAgentMS(p.connectCPU, n))
		fmt.Fprintf(tw, "Courier RSS per replica holding the watches (largest; all: %.0f MiB)\t<= 1024 MiB\t%.0f MiB\t%s\n",
			mib(p.rssWatchingTotal), mib(p.rssWatching), verdict(mib(p.rssWatching) <= 1024))
		growth := float64(p.rssWatchingTotal-p.rssBefore) / 1024 / float64(n)
		fmt.Fprintf(tw, "Courier RSS per watch (all replicas' growth from %.0f MiB / %d)\t<= 40 KiB\t%.1f KiB\t%s\n", mib(p.rssBefore), n, growth, verdict(growth <= 40))
		var each []string
		for _, c := range p.changes {
			each = append(each, ms(c.p99))
		}
		fmt.Fprintf(tw, "source change -> every agent's watch: p99, median of %d changes (its p50, last; %d of %d; Courier CPU per change %s)\t<= 1 s\t%s (%s, %s)\t%s\n",
			len(p.changes), p.received, n, ms(p.changeCPU), ms(p.p99), ms(p.p50), ms(p.last), verdict(p.received == n && p.p99 <= time.Second))
		fmt.Fprintf(tw, "  each change's p99, in order\t-\t%s\t-\n", strings.Join(each, ", "))
		rate := p.writes / p.window.Seconds()
		expected := float64(n) * p.window.Seconds() / p.interval.Seconds()
		v := verdict(rate <= 50)
		if float64(p.reportsSent) < 0.9*expected {
			v = "NOT MEASURED: heartbeats fell behind"
		}
		fmt.Fprintf(tw, "upstream writes/s, everything current (%d heartbeats of %.0f due, every %s, %.0f s window)\t<= 50/s\t%.1f/s\t%s\n",
			p.reportsSent, expected, p.interval, p.window.Seconds(), rate, v)
		fmt.Fprintf(tw, "  heartbeats sent/s; Courier CPU per heartbeat (all replicas); SubjectAccessReviews/s the upstream answered\t-\t%.1f/s; %.2f ms; %.1f/s\t-\n",
			float64(p.reportsSent)/p.window.Seconds(), perAgentMS(p.windowCPU, int(max(p.reportsSent, 1))), p.reviews/p.window.Seconds())
		fmt.Fprintf(tw, "  a heartbeat's request time, p50 and p99\t-\t%s, %s\t-\n", ms(p.hbP50), ms(p.hbP99))
		before := float64(n) / p.interval.Seconds()
		fmt.Fprintf(tw, "  before liveness digests: every heartbeat rewrote its Cluster's report (computed, not measured: N / %s)\t<= 50/s\t%.1f/s\t%s\n",
			p.interval, before, verdict(before <= 50))
		for _, st := range p.steps {
			if !st.ok {
				fmt.Fprintf(tw, "rolling restart, %s: every agent watching again\t<= 60 s\tnot within 5 minutes\tFAIL\n", st.replica)
				continue
			}
			if st.reconnecting == 0 {
				fmt.Fprintf(tw, "rolling restart, %s: no agent's watch was on it\t<= 60 s\t-\t-\n", st.replica)
				continue
			}
			fmt.Fprintf(tw, "rolling restart, %s (%d agents lost their watch): every agent watching again, from SIGTERM\t<= 60 s\t%.1f s\t%s\n",
				st.replica, st.reconnecting, st.allAfter.Seconds(), verdict(st.allAfter <= time.Minute))
			per := perAgentMS(st.cpu, max(st.reconnecting, 1))
			fmt.Fprintf(tw, "  Courier CPU per reconnecting agent (new process from its start, other replicas in the step)\t<= 5 ms\t%.2f ms\t%s\n",
				per, verdict(per <= 5))
			fmt.Fprintf(tw, "  payload reads, every copy current (Courier's counters; agents')\t0\t%.0f; %d\t%s\n",
				st.payloadCounter, st.payloadAgents, verdict(st.payloadCounter == 0 && st.payloadAgents == 0))
		}
		tw.Flush()
		if p.connectCodes != "" {
			fmt.Fprintf(w, "  first connect, opens refused or failed by HTTP status (0: no answer): %s\n", p.connectCodes)
		}
		fmt.Fprintf(w, "  first connect, Courier's APIService marked unavailable upstream (the aggregator then answers 503): %s\n", orNone(p.connectUpstream))
		for _, st := range p.steps {
			fmt.Fprintf(w, "  restart of %s: old process gone %.1f s after SIGTERM (exited on its own: %t), new one ready %.1f s after; %d watch opens refused or failed meanwhile (%d of them 410); Courier CPU in the step: new process %.1f s, other replicas %.1f s\n",
				st.replica, st.stopTook.Seconds(), st.exitedOnItsOwn, st.readyAfter.Seconds(), st.openErrors, st.gone, st.newCPU.Seconds(), (st.cpu - st.newCPU).Seconds())
		}
		fmt.Fprintf(w, "  upstream writes in the window: %s (Courier's report writes %.0f; heartbeats ran %.0f s before it); payload probe: one agent's read raised Courier's counters by %.0f\n",
			orNone(p.writesBy), p.reportWrites, p.warmup.Seconds(), p.probeReads)
		fmt.Fprintf(w, "  the upstream's priority and fairness in the heartbeat window: %s\n", orNone(p.flowControl))
		fmt.Fprintf(w, "  with every agent watching: %s; largest RSS after the rolling restart %.0f MiB\n", p.runtimeNote, mib(p.rssAfter))
	}
}

func perAgentMS(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(n)
}

// truncate shortens s to at most n bytes for a table cell.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ends keeps the first and the last n/2 bytes of s: a client error names
// the request first and its cause last.
func ends(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + "…" + s[len(s)-n/2:]
}
