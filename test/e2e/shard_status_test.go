package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/test/fleetsim"
	"github.com/courier-dev/courier/test/localenv"
)

// Status written by whoever delivers (docs/design.md#scale-out): the
// holder of a Cluster's bucket publishes its rows' statuses to the
// Cluster's status object; every other replica serves them from there,
// and passes over, watches and connects to only the Clusters it holds.

// sourceVersions reads the resourceVersion of each test source upstream.
func (f *shardFleet) sourceVersions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range shardSources {
		s, err := f.up.CoreV1().Secrets(shardNS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = s.ResourceVersion
	}
	return out
}

// staleRows reads the test rows from one replica directly (its own secure
// port, not the aggregator) and returns those that are not Synced from
// the current version of their source, and how many rows of Clusters the
// replica does not hold are.
func staleRows(t *testing.T, c *localenv.Courier, rvs map[string]string, own map[int]string) (stale []string, othersSynced int) {
	t.Helper()
	list, err := listOnReplica(t, c, shardNS)
	if err != nil {
		return []string{"listing: " + err.Error()}, 0
	}
	if n := len(list.Items); n != shardClusters*len(shardSources) {
		stale = append(stale, fmt.Sprintf("%d rows, want %d", n, shardClusters*len(shardSources)))
	}
	for _, r := range list.Items {
		want := rvs[r.Spec.Source.Name]
		if r.Status.Phase != "Synced" || r.Status.SyncedResourceVersion != want {
			stale = append(stale, fmt.Sprintf("%s: %s %q (synced %q, want %q)", r.Name, r.Status.Phase, r.Status.Message, r.Status.SyncedResourceVersion, want))
			continue
		}
		var i int
		if _, err := fmt.Sscanf(r.Spec.Cluster, "sc%02d", &i); err == nil && own[i] != c.Name() {
			othersSynced++
		}
	}
	sort.Strings(stale)
	return stale, othersSynced
}

// statusObjects returns the resourceVersion of each test Cluster's status
// object upstream, by Cluster name.
func statusObjects(t *testing.T) map[string]string {
	t.Helper()
	list, err := upstreamClients(t).kube.CoreV1().ConfigMaps(localenv.DefaultCourierNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: clusterstatus.Label + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		if cm.Annotations[clusterstatus.AnnotationClusterNamespace] == shardNS {
			out[cm.Annotations[clusterstatus.AnnotationCluster]] = cm.ResourceVersion
		}
	}
	return out
}

// statusWrites sums courier_agent_status_writes_total{object="status"}
// over the replicas: their writes of pushed Clusters' status objects.
func (f *shardFleet) statusWrites(t *testing.T) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^courier_agent_status_writes_total\{object="status"\} (\S+)$`)
	var sum float64
	for _, r := range f.replicas {
		if m := re.FindStringSubmatch(scrapeFrom(t, r)); m != nil {
			var v float64
			_, _ = fmt.Sscanf(m[1], "%g", &v)
			sum += v
		}
	}
	return sum
}

// checkServedEverywhere changes both sources and waits until every
// replica, read directly, shows every row Synced from the new versions:
// the rows of the Clusters it does not hold too, whose only source is
// what their holder published (the positive control of the rolling
// restart below, and of "no observing"). Every test Cluster's status
// object is written, and the writes are per Cluster, not per row.
func (f *shardFleet) checkServedEverywhere(t *testing.T) {
	objects, writes := statusObjects(t), f.statusWrites(t)
	if len(objects) != shardClusters {
		t.Errorf("%d test Clusters have a status object, want %d", len(objects), shardClusters)
	}
	t0, err := fleetsim.UpdateSources(context.Background(), f.up, shardNS, shardSources, shardKey, "r2")
	if err != nil {
		t.Fatal(err)
	}
	f.converge(t, "r2", t0)
	rvs, own := f.sourceVersions(t), owners(t)
	for _, r := range f.replicas {
		var others int
		eventually(t, r.Name()+" shows every row Synced from the new source versions", func() (bool, string) {
			var stale []string
			stale, others = staleRows(t, r, rvs, own)
			return len(stale) == 0, strings.Join(stale, "; ")
		})
		if others == 0 {
			t.Errorf("%s: no row of a Cluster it does not hold is Synced from the new versions", r.Name())
		}
		t.Logf("%s: %d rows of Clusters held by other replicas Synced from %v, %s after the change", r.Name(), others, rvs,
			time.Since(t0).Round(100*time.Millisecond))
	}
	after := statusObjects(t)
	for c, rv := range objects {
		if after[c] == rv {
			t.Errorf("the status object of %s was not written for the change of its sources", c)
		}
	}
	n := f.statusWrites(t) - writes
	t.Logf("a change of both sources: %v status-object writes for %d Clusters of %d rows each", n, shardClusters, len(shardSources))
	if n < shardClusters || n >= float64(shardClusters*len(shardSources)) {
		t.Errorf("%v status-object writes for a change of both sources of %d Clusters: want at least one per Cluster and fewer than one per row (%d)",
			n, shardClusters, shardClusters*len(shardSources))
	}
}

// reachableRE matches courier_cluster_reachable of a test Cluster: the
// engine sets it at the end of a pass over the Cluster and drops it with
// the Cluster's client.
var reachableRE = regexp.MustCompile(`(?m)^courier_cluster_reachable\{cluster="` + shardNS + `/(sc\d\d)"\} `)

// clientsRE matches courier_downstream_clients.
var clientsRE = regexp.MustCompile(`(?m)^courier_downstream_clients (\S+)$`)

// checkNoObserving: once the buckets have settled, each replica holds a
// downstream client (and so informers and connections) only for the
// Clusters it delivers to, and passes over only its own test Clusters. It
// can fail: before the deliverer kept statuses every replica passed over, and held
// a client for, every Cluster; the holder's own Clusters are the positive
// control.
func (f *shardFleet) checkNoObserving(t *testing.T) {
	own := owners(t)
	for _, r := range f.replicas {
		var clients, delivered float64
		defer func() {
			t.Logf("%s: %v downstream clients, delivers to %v Clusters; RSS %s", r.Name(), clients, delivered, rss(r.Pid()))
		}()
		eventually(t, r.Name()+" holds clients and passes over its own Clusters only", func() (bool, string) {
			metrics := scrapeFrom(t, r)
			var wrong, mine []string
			seen := map[string]bool{}
			for _, m := range reachableRE.FindAllStringSubmatch(metrics, -1) {
				seen[m[1]] = true
			}
			for i, o := range own {
				switch {
				case o == r.Name() && !seen[shardCluster(i)]:
					wrong = append(wrong, shardCluster(i)+" (its own) not passed over")
				case o != r.Name() && seen[shardCluster(i)]:
					wrong = append(wrong, shardCluster(i)+" (held by "+o+") passed over")
				case o == r.Name():
					mine = append(mine, shardCluster(i))
				}
			}
			clients = -1.0
			if m := clientsRE.FindStringSubmatch(metrics); m != nil {
				_, _ = fmt.Sscanf(m[1], "%g", &clients)
			}
			delivered = gauge(t, r, "courier_shard_clusters_delivered")
			if clients < float64(len(mine)) || clients > delivered {
				wrong = append(wrong, fmt.Sprintf("courier_downstream_clients %v, want between its %d test Clusters and the %v Clusters it delivers to",
					clients, len(mine), delivered))
			}
			return len(wrong) == 0, strings.Join(wrong, "; ")
		})
	}
}

// rollingRestart stops each replica in turn with SIGTERM and starts it
// again; as soon as it is ready again, every replica, read directly, shows
// every row's last status: Synced from the current source versions. No
// wait, no retry: the rows must read so from the first answer.
//
// Nothing changed, so nothing is written: neither a copy downstream nor a
// status object upstream (a new holder finds its predecessor's word).
func (f *shardFleet) rollingRestart(t *testing.T) {
	rvs := f.sourceVersions(t)
	before, objects := shardWrites(t), statusObjects(t)
	for _, r := range f.replicas {
		stopped := time.Now()
		r.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := r.Start(ctx)
		cancel()
		if err != nil {
			t.Fatalf("starting %s again: %v", r.Name(), err)
		}
		t.Logf("%s restarted, ready %s after SIGTERM", r.Name(), time.Since(stopped).Round(100*time.Millisecond))
		own := owners(t)
		for _, c := range f.replicas {
			if stale, _ := staleRows(t, c, rvs, own); len(stale) > 0 {
				t.Errorf("right after %s restarted, %s shows %d rows not Synced from the current versions: %s", r.Name(), c.Name(),
					len(stale), strings.Join(stale, "; "))
			}
		}
	}
	waitSettled(t, f.replicas...)
	// Every replica is a new process: each passed over the Clusters it
	// holds now at least once.
	own := owners(t)
	want := map[string]float64{}
	for _, o := range own {
		want[o]++
	}
	waitPassesRan(t, f.replicas, map[string]float64{}, want)
	for _, c := range f.replicas {
		if stale, _ := staleRows(t, c, rvs, own); len(stale) > 0 {
			t.Errorf("after the rolling restart settled, %s shows rows not Synced from the current versions: %s", c.Name(), strings.Join(stale, "; "))
		}
	}
	after := shardWrites(t)
	for i := 1; i <= shardClusters; i++ {
		if extra := after[i][len(before[i]):]; len(extra) != 0 {
			t.Errorf("Cluster %s: %d writes to current copies during the rolling restart, the first %s by %s", shardCluster(i),
				len(extra), extra[0], extra[0].UserAgent)
		}
	}
	for c, rv := range statusObjects(t) {
		if objects[c] != rv {
			t.Errorf("the status object of %s was written during the rolling restart (resourceVersion %s, then %s)", c, objects[c], rv)
		}
	}
}

// rss is a process's resident set (VmRSS of /proc/<pid>/status), for the
// log.
func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
