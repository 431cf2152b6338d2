package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	courierapi "github.com/courier-dev/courier/pkg/apis/courier"
	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned/scheme"
	"github.com/courier-dev/courier/test/fleetsim"
)

// pullResult is the pull row (issue 12): one source change seen by every
// pulled Cluster's agent watch.
type pullResult struct {
	agents   int
	filtered bool          // each watch as its Cluster's agent, with its selector; else all as the admin, unfiltered
	received int           // watches that saw their row's change
	p50, p99 time.Duration // from the source update to a watch seeing its row
	last     time.Duration
	cpu      time.Duration // Courier's CPU from the update until every watch had it
	events   int64         // events delivered to all watches together
}

// testPull opens one watch per pulled Cluster through the aggregator, as
// each Cluster's courier-agent does (DESIGN §9: fieldSelector
// spec.cluster=<its Cluster>), changes the one source every row copies,
// and times until every watch has its own row's change. Each watch is its
// Cluster's agent: the user its courier.dev/agent-user annotation names,
// bound to courier:agent in the workspace as test/e2e's agents are, which
// the upstream admin's client impersonates (one client and connection for
// all; the upstream authenticates the admin, then the aggregator hands
// Courier the impersonated user, so every watch goes through Courier's
// agent authorizer: checked first, by an agent refused a watch without
// its selector and one with another Cluster's). Then, as a diagnostic,
// the same watches unfiltered, which only the admin may open (each then
// receives every row and picks its own: the design before watchers were
// indexed by spec.cluster). COURIER_BENCH_PULL sets the number of agents
// (500).
func testPull(t *testing.T) {
	n := 500
	if v := os.Getenv("COURIER_BENCH_PULL"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("COURIER_BENCH_PULL=%q: want a positive number", v)
		}
	}
	ctx := context.Background()
	up := fastUpstream(t)
	cfg := rest.CopyConfig(env.Upstream.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	fc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ws = "bench-pull-ws"
	if _, err := up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = fc.FleetV1alpha1().HelmOps(ws).Delete(ctx, "pull", metav1.DeleteOptions{})
		_ = up.CoreV1().Namespaces().Delete(ctx, ws, metav1.DeleteOptions{})
		waitNamespaceGone(t, up, ws)
	}()
	if _, err := up.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s0"},
		Data: map[string][]byte{"round": []byte("0")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("a%d", i) }
	err = fleetsim.Parallel(n, setupWorkers, func(i int) error {
		_, err := fc.FleetV1alpha1().Clusters(ws).Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name(i + 1),
			Annotations: map[string]string{courierapi.AnnotationAgentUser: agentUser(name(i + 1))}}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	bindAgents(t, ctx, up, ws, n, name)
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
	waitIdle(t, courier.Pid(), time.Minute)
	agentsRefused(t, ctx, fc, ws, name)

	for round, filtered := range []bool{true, false} {
		res := pullRound(t, ctx, fc, up, ws, n, name, filtered, round+1)
		results.addPull(res)
		waitIdle(t, courier.Pid(), time.Minute)
	}
}

// agentUser is the upstream user of cluster's agent.
func agentUser(cluster string) string { return "agent-" + cluster }

// bindAgents binds the ClusterRole courier:agent to the n agents' users in
// ws (one RoleBinding naming them all): what lets an agent reach Courier
// at all; Courier's authorizer then narrows it to its Cluster's rows.
func bindAgents(t *testing.T, ctx context.Context, up kubernetes.Interface, ws string, n int, name func(int) string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "courier-agents", Namespace: ws},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "courier:agent"},
	}
	for i := 1; i <= n; i++ {
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: agentUser(name(i))})
	}
	if _, err := up.RbacV1().RoleBindings(ws).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// watchAs opens a watch of ws's rows as user, impersonated by fc's
// (the upstream admin's) client.
func watchAs(ctx context.Context, fc versioned.Interface, ws, user string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return fc.CourierV1alpha1().RESTClient().Get().SetHeader("Impersonate-User", user).
		Namespace(ws).Resource("downstreamcopies").VersionedParams(&opts, scheme.ParameterCodec).Watch(ctx)
}

// agentsRefused checks that the watches are authorized as the agents,
// not as the admin who impersonates them: the first agent is refused, by
// Courier's agent authorizer (its reason names the agent), a watch without
// its selector and one with the second Cluster's, and allowed its own.
// Waited for, since Courier reads the Clusters' annotations from a watch.
func agentsRefused(t *testing.T, ctx context.Context, fc versioned.Interface, ws string, name func(int) string) {
	t.Helper()
	user := agentUser(name(1))
	cases := []struct {
		what     string
		selector string
		refused  bool
	}{
		{"without its selector", "", true},
		{"with another Cluster's selector", "spec.cluster=" + name(2), true},
		{"with its own selector", "spec.cluster=" + name(1), false},
	}
	for _, c := range cases {
		var last error
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			w, err := watchAs(ctx, fc, ws, user, metav1.ListOptions{FieldSelector: c.selector})
			if w != nil {
				w.Stop()
			}
			last = err
			if c.refused {
				return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "is the courier-agent of Cluster"), nil
			}
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("a watch as %s %s: want refused=%t by Courier's agent authorizer, last answer: %v", user, c.what, c.refused, last)
		}
	}
	results.note("pull: the watches are the agents' own users (impersonated); Courier's agent authorizer refused %s a watch without its selector "+
		"and one with another Cluster's, and allowed its own", user)
}

// waitRows waits until ws holds want rows.
func waitRows(ctx context.Context, fc versioned.Interface, ws string, want int) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		l, err := fc.CourierV1alpha1().DownstreamCopies(ws).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == want {
			return nil
		}
		if time.Now().After(deadline) {
			got := -1
			if l != nil {
				got = len(l.Items)
			}
			return fmt.Errorf("%s holds %d rows after 3 minutes, want %d (%v)", ws, got, want, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pullRound opens the n watches, changes the source and times the rows'
// arrival at each: a watch has its row once it receives that row with the
// source's new resourceVersion.
func pullRound(t *testing.T, ctx context.Context, fc versioned.Interface, up kubernetes.Interface, ws string, n int,
	name func(int) string, filtered bool, round int) pullResult {
	list, err := fc.CourierV1alpha1().DownstreamCopies(ws).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	watches := make([]watch.Interface, n)
	for i := range n {
		opts := metav1.ListOptions{ResourceVersion: list.ResourceVersion}
		if filtered {
			opts.FieldSelector = "spec.cluster=" + name(i+1)
			watches[i], err = watchAs(ctx, fc, ws, agentUser(name(i+1)), opts)
		} else {
			watches[i], err = fc.CourierV1alpha1().DownstreamCopies(ws).Watch(ctx, opts)
		}
		if err != nil {
			t.Fatalf("watch %d of %d: %v", i+1, n, err)
		}
	}
	defer func() {
		for _, w := range watches {
			w.Stop()
		}
	}()
	src, err := up.CoreV1().Secrets(ws).Get(ctx, "s0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src.Data["round"] = []byte(strconv.Itoa(round))

	var (
		events  atomic.Int64
		mu      sync.Mutex
		arrived = make([]time.Duration, 0, n)
		wg      sync.WaitGroup
		t0      time.Time
	)
	rvKnown := make(chan struct{})
	var rv string
	for i, w := range watches {
		cluster := name(i + 1)
		wg.Go(func() {
			<-rvKnown
			for ev := range w.ResultChan() {
				events.Add(1)
				row, ok := ev.Object.(*courierv1alpha1.DownstreamCopy)
				if !ok || row.Spec.Cluster != cluster || row.Spec.Source.ResourceVersion != rv {
					continue
				}
				mu.Lock()
				arrived = append(arrived, time.Since(t0))
				mu.Unlock()
				return
			}
		})
	}
	// The watches read only once the new resourceVersion is known; until
	// then their events wait in the watches' channels.
	c0 := mustCPU(t, courier.Pid())
	t0 = time.Now()
	updated, err := up.CoreV1().Secrets(ws).Update(ctx, src, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv = updated.ResourceVersion
	close(rvKnown)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
	}
	cpu := mustCPU(t, courier.Pid()) - c0
	mu.Lock()
	defer mu.Unlock()
	res := pullResult{agents: n, filtered: filtered, received: len(arrived), cpu: cpu, events: events.Load()}
	if len(arrived) > 0 {
		res.p50, res.p99, res.last = fleetsim.Percentile(arrived, 50), fleetsim.Percentile(arrived, 99), fleetsim.MaxDuration(arrived)
	}
	if len(arrived) < n {
		t.Errorf("%d of %d watches (filtered=%t) saw their row's change within 5 minutes", len(arrived), n, filtered)
	}
	return res
}

// addPull records a pull row.
func (r *report) addPull(p pullResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pull = append(r.pull, p)
}

// printPull writes the pull rows: filtered first, then unfiltered, with
// the ratio of the two as the check.
func printPull(w io.Writer, rows []pullResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pull: agents' watches\tsaw their row\tp50\tp99\tlast\tCourier CPU\tevents delivered")
	for _, p := range rows {
		kind := "filtered (spec.cluster), each as its agent"
		if !p.filtered {
			kind = "unfiltered, as the admin"
		}
		fmt.Fprintf(tw, "%d %s\t%d\t%s\t%s\t%s\t%s\t%d\n", p.agents, kind, p.received, ms(p.p50), ms(p.p99), ms(p.last), ms(p.cpu), p.events)
	}
	tw.Flush()
}
