package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/localenv"
)

// Short leader election timings, so a takeover after SIGKILL is quick to
// wait for; the rules are the same as with the defaults.
const (
	haLeaseDuration = 6 * time.Second
	haRetryPeriod   = time.Second
)

var haArgs = []string{
	"--leader-elect-lease-duration=" + haLeaseDuration.String(),
	"--leader-elect-renew-deadline=4s",
	"--leader-elect-retry-period=" + haRetryPeriod.String(),
}

// takeoverLimit is the latest a follower can take the Lease after the
// leader is killed, as client-go's elector works: the leader renewed at
// most a retry period before the kill; the follower polls the Lease every
// retry period stretched by up to JitterFactor, so it saw that renewal up
// to one jittered period later and counts the lease duration from then;
// after that it acquires at its next jittered poll. Two seconds on top
// allow for the requests themselves on a busy machine.
func takeoverLimit() time.Duration {
	jittered := time.Duration(float64(haRetryPeriod) * (1 + leaderelection.JitterFactor))
	return haRetryPeriod + jittered + haLeaseDuration + jittered + 2*time.Second
}

// startReplicas stops the suite's Courier and starts two replicas behind a
// Balancer in its place; the suite's Courier is back when the test ends.
// They run with sharding off (--shard-buckets=0), so the leader delivers
// everything: the mode these tests are about. TestShardedDelivery covers
// replicas that share delivery.
func startReplicas(t *testing.T) ([]*localenv.Courier, *localenv.Balancer) {
	t.Helper()
	courier.Stop() // SIGTERM: it releases the Lease
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := courier.Start(ctx); err != nil {
			t.Errorf("restarting the suite's Courier: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	replicas, lb, err := env.StartCourierReplicas(ctx, localenv.CourierOptions{Binary: courier.Binary(), RepoRoot: repoRoot, Args: append(append([]string{"-v=2", "--shard-buckets=0"}, haArgs...), fieldCopyArgs...)}, 2)
	if err != nil {
		t.Fatalf("starting two replicas: %v", err)
	}
	t.Cleanup(func() {
		for _, r := range replicas {
			r.Stop()
		}
	})
	return replicas, lb
}

var masterStatus = regexp.MustCompile(`(?m)^leader_election_master_status\{name="courier"\} ([01])$`)

// leads reads a replica's leader_election_master_status.
func leads(t *testing.T, c *localenv.Courier) bool {
	t.Helper()
	m := masterStatus.FindStringSubmatch(scrapeFrom(t, c))
	if m == nil {
		t.Fatalf("%s: /metrics has no leader_election_master_status{name=\"courier\"}", c.LogPath)
	}
	return m[1] == "1"
}

// waitLeader waits until exactly one of the running replicas leads and
// returns it.
func waitLeader(t *testing.T, running ...*localenv.Courier) *localenv.Courier {
	t.Helper()
	var leader *localenv.Courier
	eventually(t, "exactly one replica leads", func() (bool, string) {
		leader = nil
		n := 0
		for _, r := range running {
			if leads(t, r) {
				leader, n = r, n+1
			}
		}
		return n == 1, fmt.Sprintf("%d of %d replicas report leader_election_master_status 1", n, len(running))
	})
	return leader
}

// leaseHolder is the holderIdentity of the Lease courier-system/courier.
func leaseHolder(t *testing.T) string {
	t.Helper()
	l, err := upstreamClients(t).kube.CoordinationV1().Leases(localenv.DefaultCourierNamespace).Get(context.Background(), "courier", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// replicaRows reads a workspace's rows from one replica directly, as
// "name phase syncedRV message", which must read the same on every
// replica.
func replicaRows(t *testing.T, c *localenv.Courier, ns string) []string {
	t.Helper()
	list, err := listOnReplica(t, c, ns)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var out []string
	for _, r := range list.Items {
		out = append(out, fmt.Sprintf("%s %s %s %s", r.Name, r.Status.Phase, r.Status.SyncedResourceVersion, r.Status.Message))
	}
	sort.Strings(out)
	return out
}

// listOnReplica lists a namespace's rows from one replica directly (its
// own secure port, not the aggregator), so that a test can tell what each
// replica serves.
func listOnReplica(t *testing.T, c *localenv.Courier, ns string) (*v1alpha1.DownstreamCopyList, error) {
	t.Helper()
	client, err := versioned.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return client.CourierV1alpha1().DownstreamCopies(ns).List(context.Background(), metav1.ListOptions{})
}

// writesInto counts Courier's writes to objects in namespace dest, per
// downstream cluster, from the audit logs.
func writesInto(t *testing.T, dest string) []string {
	t.Helper()
	var out []string
	for i := range env.Downstreams {
		for _, w := range courierWrites(t, i) {
			if strings.Contains(w, " "+dest+"/") {
				out = append(out, fmt.Sprintf("downstream-%d: %s", i+1, w))
			}
		}
	}
	return out
}

// writtenBy sums courier_copies_total{result="written"} on a replica.
func writtenBy(t *testing.T, c *localenv.Courier) float64 {
	t.Helper()
	return counter(t, c, "courier_copies_total")
}

// counter sums a counter's samples with result="written" on a replica.
func counter(t *testing.T, c *localenv.Courier, name string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(scrapeFrom(t, c), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, `result="written"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// TestHighAvailability runs two replicas against one upstream: exactly one
// holds the Lease and writes, both serve the same rows; SIGKILL of the
// leader hands over within the lease duration and a change made after the
// kill reaches every cluster, each copy written once; the API answers
// through the APIService while either replica is down.
func TestHighAvailability(t *testing.T) {
	ctx := context.Background()
	w := newWorkspace(t, "ws-ha", nil, nil)
	w.apply(selectAll("default"))
	dest := "ha-dest"
	setSource := func(v string) {
		w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": v}})
	}
	setSource("v1")
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")}))
	synced := []string{"c1/Secret/s@" + dest + "=Synced", "c2/Secret/s@" + dest + "=Synced"}
	w.waitRows(metav1.ListOptions{}, synced...)
	before := writesInto(t, dest)

	replicas, lb := startReplicas(t)
	leader := waitLeader(t, replicas...)
	follower := replicas[0]
	if leader == replicas[0] {
		follower = replicas[1]
	}
	if leaseHolder(t) == "" {
		t.Fatal("the Lease courier-system/courier has no holder while a replica leads")
	}

	t.Run("both replicas serve the same rows", func(t *testing.T) {
		w.waitRows(metav1.ListOptions{}, synced...)
		eventually(t, "rows read the same from either replica", func() (bool, string) {
			a, b := replicaRows(t, leader, w.ns), replicaRows(t, follower, w.ns)
			// Synced on both: each replica's engine has planned both copies
			// (the leader writes before it records Synced).
			return strings.Join(a, "\n") == strings.Join(b, "\n") && len(a) == 2 && strings.Count(strings.Join(a, "\n"), " Synced ") == 2,
				fmt.Sprintf("leader:\n  %s\nfollower:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
		})
		// Copies current before the replicas started: neither writes.
		if extra := writesInto(t, dest)[len(before):]; len(extra) != 0 {
			t.Errorf("replicas wrote copies that were already current: %q", extra)
		}
	})

	t.Run("only the leader writes", func(t *testing.T) {
		base := len(writesInto(t, dest))
		followerWrote := writtenBy(t, follower)
		setSource("v2")
		for i := range env.Downstreams {
			waitSecret(t, i, dest, "s", 10*time.Second, "v2 copied", secretData("k", "v2"))
		}
		eventually(t, "the follower shows the copies Synced", func() (bool, string) {
			rows := replicaRows(t, follower, w.ns)
			return len(rows) == 2 && strings.Contains(rows[0], " Synced ") && strings.Contains(rows[1], " Synced "), strings.Join(rows, "\n")
		})
		if got := writesInto(t, dest)[base:]; len(got) != 2 {
			t.Errorf("writes for one change = %q, want one update per cluster", got)
		}
		if n := writtenBy(t, follower) - followerWrote; n != 0 {
			t.Errorf("the follower counted %v writes", n)
		}
	})

	t.Run("field copies: only the leader writes", func(t *testing.T) {
		fieldCopySetup(t)
		ns := fcNamespace(t, "fc-ha")
		grantSecretWrites(t, ns)
		kube := upstreamClients(t).kube
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "src"},
			StringData: map[string]string{"k": "from-src"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		leaderBefore, followerBefore := counter(t, leader, "courier_fieldcopy_writes_total"), counter(t, follower, "courier_fieldcopy_writes_total")
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dst",
			Annotations: map[string]string{"k8s-copier.fig.org/replace-data": "secret:src:data"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the field copy is applied, and both replicas say so", func() (bool, string) {
			dst, err := kube.CoreV1().Secrets(ns).Get(ctx, "dst", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var phases []string
			for _, r := range []*localenv.Courier{leader, follower} {
				client, err := versioned.NewForConfig(r.Config)
				if err != nil {
					t.Fatal(err)
				}
				row, err := client.CourierV1alpha1().FieldCopies(ns).Get(ctx, "secret.dst.data", metav1.GetOptions{})
				if err != nil {
					phases = append(phases, err.Error())
					continue
				}
				phases = append(phases, string(row.Status.Phase))
			}
			return string(dst.Data["k"]) == "from-src" && strings.Join(phases, ",") == "Applied,Applied",
				fmt.Sprintf("target has %d keys; rows on leader, follower: %v", len(dst.Data), phases)
		})
		if n := counter(t, follower, "courier_fieldcopy_writes_total") - followerBefore; n != 0 {
			t.Errorf("the follower wrote %v field-copy targets", n)
		}
		if n := counter(t, leader, "courier_fieldcopy_writes_total") - leaderBefore; n != 1 {
			t.Errorf("the leader wrote %v field-copy targets, want 1", n)
		}
	})

	t.Run("SIGKILL of the leader", func(t *testing.T) {
		oldHolder := leaseHolder(t)
		base := len(writesInto(t, dest))
		killed := time.Now()
		leader.Kill()
		setSource("v3")

		// The API answers while the leader is down, through the
		// aggregator and the Service (the Balancer), once the dead
		// replica's readiness probe fails.
		if err := lb.WaitReady(ctx, 1, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if out := kubectl(t, "get", "dcp", "-n", w.ns); !strings.Contains(out, "app.c1.secret.s") {
				t.Fatalf("kubectl get dcp with the leader down:\n%s", out)
			}
		}

		eventually(t, "the follower takes the Lease", func() (bool, string) {
			return leads(t, follower), "holder still " + leaseHolder(t)
		})
		lease, err := upstreamClients(t).kube.CoordinationV1().Leases(localenv.DefaultCourierNamespace).Get(ctx, "courier", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := lease.Spec.HolderIdentity; h == nil || *h == oldHolder || lease.Spec.AcquireTime == nil {
			t.Fatalf("the Lease was not taken over: holder %v (was %q), acquireTime %v", h, oldHolder, lease.Spec.AcquireTime)
		}
		// acquireTime is written by the new leader when it took the Lease
		// (same machine, same clock as killed).
		tookOver := lease.Spec.AcquireTime.Sub(killed)
		if limit := takeoverLimit(); tookOver > limit {
			t.Errorf("the follower took over after %s, want within %s (lease duration %s, retry period %s)",
				tookOver.Round(100*time.Millisecond), limit.Round(100*time.Millisecond), haLeaseDuration, haRetryPeriod)
		}
		t.Logf("takeover after SIGKILL: %s (lease duration %s)", tookOver.Round(100*time.Millisecond), haLeaseDuration)
		for i := range env.Downstreams {
			waitSecret(t, i, dest, "s", haLeaseDuration+10*time.Second, "v3 copied by the new leader", secretData("k", "v3"))
		}
		// The new leader's rows Synced at v3's resourceVersion: its passes
		// that wrote v3 are over, and the audit logs hold their writes.
		src, err := upstreamClients(t).kube.CoreV1().Secrets(w.ns).Get(ctx, "s", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the new leader's rows Synced at v3", func() (bool, string) {
			rows := strings.Join(replicaRows(t, follower, w.ns), "\n")
			return strings.Count(rows, " Synced "+src.ResourceVersion+" ") == 2, rows
		})
		if got := writesInto(t, dest)[base:]; len(got) != 2 {
			t.Errorf("writes for the change made after the kill = %q, want exactly one update per cluster", got)
		}
		leader, follower = follower, leader
	})

	t.Run("either replica down, the API answers", func(t *testing.T) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := follower.Start(sctx); err != nil { // the killed one, back as follower
			t.Fatal(err)
		}
		if err := lb.WaitReady(ctx, 2, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		leader.Stop() // SIGTERM: it finishes its writes, releases the Lease, exits
		released := time.Now()
		// A released Lease is taken at the next retry, not after the lease
		// duration.
		waitLeader(t, follower)
		if d := time.Since(released); d > haLeaseDuration {
			t.Errorf("takeover after SIGTERM took %s, longer than the lease duration: the Lease was not released", d.Round(100*time.Millisecond))
		}
		if err := lb.WaitReady(ctx, 1, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if out := kubectl(t, "get", "dcp", "-n", w.ns); !strings.Contains(out, "app.c2.secret.s") {
				t.Fatalf("kubectl get dcp with the other replica down:\n%s", out)
			}
		}
		setSource("v4")
		for i := range env.Downstreams {
			waitSecret(t, i, dest, "s", 10*time.Second, "v4 copied", secretData("k", "v4"))
		}
	})
}
