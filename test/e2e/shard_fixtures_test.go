package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/delivery"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/pkg/sharding"
	"github.com/courier-dev/courier/test/fleetsim"
	"github.com/courier-dev/courier/test/localenv"
)

// Short shard timings (those of test/sharding), so a take-over after
// SIGKILL is quick to wait for; the rules are the defaults'.
const (
	shardLease    = 6 * time.Second
	shardClusters = 30
	shardNS       = "ws-shard"
	shardLabel    = "courier-shard-test"
	shardKey      = "round"
)

var shardArgs = []string{
	// One Cluster at a time per replica: a replica's fan-out to its ten or
	// so Clusters then takes long enough for the kill to land in it.
	"--copy-workers=1",
	"--shard-lease-duration=" + shardLease.String(),
	"--shard-renew-deadline=4s",
	"--shard-renew-period=2s",
	"--shard-retry-period=1s",
}

var shardSources = []string{"s0", "s1"}

func shardCluster(i int) string { return fmt.Sprintf("sc%02d", i) }
func shardDest(i int) string    { return fmt.Sprintf("shard-d%02d", i) }

// shardIndex is the Cluster number of a destination namespace, 0 for
// any other namespace.
func shardIndex(ns string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(ns, "shard-d"))
	if err != nil || !strings.HasPrefix(ns, "shard-d") {
		return 0
	}
	return n
}

// shardFleet is three replicas sharing delivery to 30 Clusters on the two
// downstream kube-apiservers (alternately), each Cluster with its own
// destination namespace, one HelmOp listing two Secrets.
type shardFleet struct {
	replicas []*localenv.Courier
	up       kubernetes.Interface
	fc       versioned.Interface
	w        *fleetsim.Watcher
}

// startShardReplicas stops the suite's Courier and starts n replicas
// sharing delivery behind a Balancer; the suite's Courier is back when
// the test ends.
func startShardReplicas(t *testing.T, n int) []*localenv.Courier {
	t.Helper()
	courier.Stop()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := courier.Start(ctx); err != nil {
			t.Errorf("restarting the suite's Courier: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(append([]string{"-v=2"}, haArgs...), shardArgs...)
	replicas, _, err := env.StartCourierReplicas(ctx, localenv.CourierOptions{Binary: courier.Binary(), RepoRoot: repoRoot, Args: args}, n)
	if err != nil {
		t.Fatalf("starting %d replicas: %v", n, err)
	}
	t.Cleanup(func() {
		for _, r := range replicas {
			r.Stop()
		}
	})
	return replicas
}

// bucketLeases returns the bucket Leases by bucket number.
func bucketLeases(t *testing.T) map[int]coordinationv1.Lease {
	t.Helper()
	list, err := upstreamClients(t).kube.CoordinationV1().Leases(localenv.DefaultCourierNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: sharding.BucketLabel + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]coordinationv1.Lease{}
	for _, l := range list.Items {
		if n, err := strconv.Atoi(strings.TrimPrefix(l.Name, sharding.BucketLeasePrefix)); err == nil {
			out[n] = l
		}
	}
	return out
}

func holderOf(l coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitSettled waits until every bucket's Lease is held by its rendezvous
// owner among the running replicas.
func waitSettled(t *testing.T, running ...*localenv.Courier) {
	t.Helper()
	var ids []string
	for _, r := range running {
		ids = append(ids, r.Name())
	}
	eventually(t, "every bucket held by its desired owner among "+strings.Join(ids, ", "), func() (bool, string) {
		leases := bucketLeases(t)
		wrong := 0
		for b := range sharding.DefaultBuckets {
			if holderOf(leases[b]) != sharding.DesiredOwner(b, ids) {
				wrong++
			}
		}
		return wrong == 0, fmt.Sprintf("%d of %d buckets not with their desired owner", wrong, sharding.DefaultBuckets)
	})
}

// owners returns the holder of each test Cluster's bucket (by number).
func owners(t *testing.T) map[int]string {
	t.Helper()
	leases := bucketLeases(t)
	out := map[int]string{}
	for i := 1; i <= shardClusters; i++ {
		out[i] = holderOf(leases[sharding.Bucket(shardNS, shardCluster(i), sharding.DefaultBuckets)])
	}
	return out
}

// setup creates the Clusters, the sources and the HelmOp, and waits for
// the first copies and Synced rows.
func (f *shardFleet) setup(t *testing.T) {
	ctx := context.Background()
	f.fc = fleetClient(t)
	f.up = upstreamClients(t).kube
	var err error
	if f.w, err = fleetsim.StartWatcher(env.Downstreams, shardLabel, shardKey); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.w.Stop)
	if _, err := f.up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shardNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cleanup)
	if _, err := fleetsim.CreateClusters(ctx, f.up, f.fc, shardNS, shardClusters, shardCluster, env.Downstreams, 8); err != nil {
		t.Fatal(err)
	}
	for _, name := range shardSources {
		if _, err := f.up.CoreV1().Secrets(shardNS).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shardLabel: "copy"}},
			Data:       map[string][]byte{shardKey: []byte("r0")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	for _, name := range shardSources {
		op.Spec.DownstreamResources = append(op.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "Secret", Name: name})
	}
	for i := 1; i <= shardClusters; i++ {
		target := fleet.BundleTarget{ClusterName: shardCluster(i)}
		target.TargetNamespace = shardDest(i)
		op.Spec.Targets = append(op.Spec.Targets, target)
	}
	t0 := time.Now()
	if _, err := f.fc.FleetV1alpha1().HelmOps(shardNS).Create(ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.converge(t, "r0", t0)
}

// keys are the arrivals of value at every copy.
func (f *shardFleet) keys(value string) []fleetsim.ArrivalKey {
	var out []fleetsim.ArrivalKey
	for i := 1; i <= shardClusters; i++ {
		for _, name := range shardSources {
			out = append(out, fleetsim.ArrivalKey{NS: shardDest(i), Name: name, Value: value})
		}
	}
	return out
}

// converge waits until every copy holds value and every row is Synced.
func (f *shardFleet) converge(t *testing.T, value string, t0 time.Time) {
	t.Helper()
	lat, err := f.w.Wait(f.keys(value), t0, 3*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, fleetsim.RowsSummary(f.fc, shardNS))
	}
	if err := fleetsim.WaitSynced(context.Background(), f.fc, shardNS, shardClusters*len(shardSources), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d copies of %s arrived, the last %s after the change", len(lat), value, fleetsim.MaxDuration(lat).Round(10*time.Millisecond))
}

// cleanup removes the workspace and the copies' namespaces.
func (f *shardFleet) cleanup() {
	ctx := context.Background()
	_ = f.up.CoreV1().Namespaces().Delete(ctx, shardNS, metav1.DeleteOptions{})
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			continue
		}
		for i := 1; i <= shardClusters; i++ {
			_ = kube.CoreV1().Namespaces().Delete(ctx, shardDest(i), metav1.DeleteOptions{})
		}
		_ = kube.CoreV1().Namespaces().Delete(ctx, shardKeepNS, metav1.DeleteOptions{})
	}
}

// shardWrites returns Courier's writes for the test Clusters, by Cluster
// number, from both downstream audit logs, in the order received.
func shardWrites(t *testing.T) map[int][]fleetsim.Write {
	t.Helper()
	out := map[int][]fleetsim.Write{}
	for _, ds := range env.Downstreams {
		writes, err := fleetsim.CourierWrites(ds.AuditLog)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range writes {
			ns := w.Namespace
			if w.Resource == "namespaces" {
				ns = w.Name
			}
			if i := shardIndex(ns); i > 0 {
				out[i] = append(out[i], w)
			}
		}
	}
	for i := range out {
		sort.Slice(out[i], func(a, b int) bool { return out[i][a].Received.Before(out[i][b].Received) })
	}
	return out
}

// writers returns, per user agent, the span from the first write
// received to the last write completed.
func writers(writes []fleetsim.Write) map[string][2]time.Time {
	out := map[string][2]time.Time{}
	for _, w := range writes {
		s, ok := out[w.UserAgent]
		if !ok {
			s = [2]time.Time{w.Received, w.Time}
		}
		if w.Received.Before(s[0]) {
			s[0] = w.Received
		}
		if w.Time.After(s[1]) {
			s[1] = w.Time
		}
		out[w.UserAgent] = s
	}
	return out
}

// gauge reads one replica's gauge name{identity=<its name>}.
func gauge(t *testing.T, c *localenv.Courier, name string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + name + `\{identity="` + regexp.QuoteMeta(c.Name()) + `"\} (\S+)$`)
	m := re.FindStringSubmatch(scrapeFrom(t, c))
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// pushedOwners counts, per holder, the pushed Clusters (delivery.Of) of
// every workspace whose bucket it holds: what
// courier_shard_clusters_delivered counts.
func pushedOwners(t *testing.T) map[string]int {
	t.Helper()
	list, err := fleetClient(t).FleetV1alpha1().Clusters("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases := bucketLeases(t)
	out := map[string]int{}
	for _, c := range list.Items {
		if delivery.Of(&c).Pushed() {
			out[holderOf(leases[sharding.Bucket(c.Namespace, c.Name, sharding.DefaultBuckets)])]++
		}
	}
	return out
}

// deliveredByColumn reads the downstreamcopies Table of the workspace
// through the aggregator, as kubectl get -o wide does, and returns the
// Delivered-By cell by Cluster.
func deliveredByColumn(t *testing.T) map[string]string {
	t.Helper()
	client, err := rest.HTTPClientFor(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("GET", env.Upstream.Config.Host+"/apis/courier.dev/v1alpha1/namespaces/"+shardNS+"/downstreamcopies?includeObject=None", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil || resp.StatusCode != 200 {
		t.Fatalf("Table of downstreamcopies: %d %v\n%s", resp.StatusCode, err, body)
	}
	col := map[string]int{}
	for i, c := range tbl.ColumnDefinitions {
		col[c.Name] = i
	}
	out := map[string]string{}
	for _, r := range tbl.Rows {
		out[fmt.Sprint(r.Cells[col["Cluster"]])] = fmt.Sprint(r.Cells[col["Delivered-By"]])
	}
	return out
}

// metric reads one series (name with its labels, as /metrics writes it)
// from replica c; -1 when c does not serve it.
func metric(t *testing.T, c *localenv.Courier, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(scrapeFrom(t, c))
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

const (
	wholePasses = `courier_cluster_passes_total{scope="whole"}`
	queueDepth  = `workqueue_depth{name="courier_clusters"}`
	queueBusy   = `workqueue_unfinished_work_seconds{name="courier_clusters"}`
)

// wholePassCounts returns each replica's whole passes so far, by name.
func wholePassCounts(t *testing.T, replicas ...*localenv.Courier) map[string]float64 {
	out := map[string]float64{}
	for _, r := range replicas {
		out[r.Name()] = max(metric(t, r, wholePasses), 0)
	}
	return out
}

// waitPassesRan waits until each replica made at least want[name] whole
// passes more than base[name] (a replica started since counts from 0) and
// its Cluster queue is drained: nothing queued, nothing in a pass. The
// passes the hand-overs queued have then run, so a check that they wrote
// nothing follows passes that could have.
func waitPassesRan(t *testing.T, replicas []*localenv.Courier, base, want map[string]float64) {
	t.Helper()
	eventually(t, "the passes queued by the hand-overs ran", func() (bool, string) {
		var msg []string
		ok := true
		for _, r := range replicas {
			passes, depth, busy := metric(t, r, wholePasses)-base[r.Name()], metric(t, r, queueDepth), metric(t, r, queueBusy)
			ok = ok && passes >= want[r.Name()] && depth == 0 && busy == 0
			msg = append(msg, fmt.Sprintf("%s: %v whole passes (want %v), queue %v, in a pass for %vs", r.Name(), passes, want[r.Name()], depth, busy))
		}
		return ok, strings.Join(msg, "; ")
	})
	t.Logf("passes after the hand-overs: %v", wholePassCounts(t, replicas...))
}
