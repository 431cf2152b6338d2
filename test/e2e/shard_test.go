package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/pkg/sharding"
	"github.com/courier-dev/courier/test/fleetsim"
	"github.com/courier-dev/courier/test/localenv"
)

// TestShardedDelivery runs three replicas that share delivery to 30
// Clusters (docs/design.md#scale-out): every Cluster's bucket has one holder,
// the copies land, and each replica wrote only for its own Clusters (the
// downstream audit logs' user agents, its metrics, its log); SIGKILL of a
// replica in the middle of a fan-out moves its buckets once their Leases
// expire, every copy converges, and no Cluster is written by two
// replicas at overlapping times; scaling to one replica and back to three
// loses no copy and writes none that is current; every replica, read
// directly, serves the statuses the holders published, holds clients for
// its own Clusters only, and after a rolling restart shows every row's
// last status from its first answer; a copy kept after its entry went
// shows Kept on every replica.
func TestShardedDelivery(t *testing.T) {
	f := &shardFleet{replicas: startShardReplicas(t, 3)}
	waitSettled(t, f.replicas...)
	f.setup(t)

	t.Run("each Cluster delivered by the holder of its bucket alone", func(t *testing.T) { f.checkOwnDelivery(t) })
	t.Run("SIGKILL of an owner mid-fan-out", func(t *testing.T) { f.killMidFanout(t) })
	t.Run("3 to 1 to 3 replicas", func(t *testing.T) { f.scaleDownAndUp(t) })
	t.Run("every replica serves the deliverer's statuses", func(t *testing.T) { f.checkServedEverywhere(t) })
	t.Run("each replica watches its own Clusters only", func(t *testing.T) { f.checkNoObserving(t) })
	t.Run("rolling restart: every row's last status at once on every replica", func(t *testing.T) { f.rollingRestart(t) })
	t.Run("each replica watches its own Clusters only, after the rolling restart", func(t *testing.T) { f.checkNoObserving(t) })
	t.Run("every replica serves the rows of leftover copies", func(t *testing.T) { f.checkLeftoversEverywhere(t) })
}

// checkOwnDelivery: every test Cluster's bucket is held by one of the
// replicas; every write to its copies carries that replica's user agent;
// each replica's gauge counts the Clusters it holds and its log names
// copies written for those only; kubectl's Delivered-By column names the
// holder.
func (f *shardFleet) checkOwnDelivery(t *testing.T) {
	own := owners(t)
	ids := map[string]bool{}
	for _, r := range f.replicas {
		ids[r.Name()] = true
	}
	perReplica := map[string]int{}
	for i, o := range own {
		if !ids[o] {
			t.Fatalf("Cluster %s: bucket held by %q, not a running replica", shardCluster(i), o)
		}
		perReplica[o]++
	}
	t.Logf("test Clusters per replica: %v", perReplica)
	for i, writes := range shardWrites(t) {
		for _, w := range writes {
			if w.UserAgent != "courier/"+own[i] {
				t.Errorf("Cluster %s (held by %s): %s written by %q", shardCluster(i), own[i], w, w.UserAgent)
			}
		}
	}
	eventually(t, "courier_shard_clusters_delivered counts each replica's Clusters", func() (bool, string) {
		want := pushedOwners(t)
		var msg []string
		ok := true
		for _, r := range f.replicas {
			got := gauge(t, r, "courier_shard_clusters_delivered")
			ok = ok && got == float64(want[r.Name()])
			msg = append(msg, fmt.Sprintf("%s: %v, holds %d", r.Name(), got, want[r.Name()]))
		}
		return ok, strings.Join(msg, "; ")
	})
	copied := regexp.MustCompile(`"Copied".*cluster="` + shardNS + `/(sc\d\d)"`)
	for _, r := range f.replicas {
		log, err := os.ReadFile(r.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range copied.FindAllStringSubmatch(string(log), -1) {
			n++
			var i int
			_, _ = fmt.Sscanf(m[1], "sc%02d", &i)
			if own[i] != r.Name() {
				t.Errorf("%s logged a copy for %s, held by %s", r.Name(), m[1], own[i])
			}
		}
		t.Logf("%s: %d copies logged, %d Clusters held", r.Name(), n, perReplica[r.Name()])
	}
	by := deliveredByColumn(t)
	for i, o := range own {
		if by[shardCluster(i)] != o {
			t.Errorf("Delivered-By of %s = %q, want %s", shardCluster(i), by[shardCluster(i)], o)
		}
	}
}

// killMidFanout changes both sources, SIGKILLs the holder of sc01's bucket
// once the first of its own Clusters has both new copies, and checks that
// the kill landed mid fan-out (some, not all, of its Clusters current),
// the take-over, and that the Clusters written by both never saw their
// writes overlap.
func (f *shardFleet) killMidFanout(t *testing.T) {
	own := owners(t)
	var victim *localenv.Courier
	var survivors []*localenv.Courier
	for _, r := range f.replicas {
		if r.Name() == own[1] {
			victim = r
		} else {
			survivors = append(survivors, r)
		}
	}
	before := bucketLeases(t)
	// Killed from the watch of the copy that completes the first of its
	// own Clusters: with one copy worker it passes over one Cluster at a
	// time, so the others are still to come.
	var once sync.Once
	var killed time.Time
	arrived := map[string]int{} // by destination namespace; OnArrival calls one at a time
	done := make(chan struct{})
	f.w.OnArrival(func(k fleetsim.ArrivalKey) {
		if k.Value != "r1" || own[shardIndex(k.NS)] != victim.Name() {
			return
		}
		if arrived[k.NS]++; arrived[k.NS] == len(shardSources) {
			once.Do(func() { killed = time.Now(); victim.Kill(); close(done) })
		}
	})
	t0, err := fleetsim.UpdateSources(context.Background(), f.up, shardNS, shardSources, shardKey, "r1")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("no Cluster of the victim's got both new copies within a minute")
	}
	f.w.OnArrival(nil)
	current, total := f.currentOf(t, own, victim.Name(), "r1")
	t.Logf("SIGKILLed %s %s after the change; victim's Clusters current then: %d of %d", victim.Name(), killed.Sub(t0).Round(time.Millisecond), current, total)
	if current == 0 || current == total {
		t.Errorf("the kill did not land mid fan-out: %d of the victim's %d Clusters current", current, total)
	}
	f.converge(t, "r1", t0)
	var after map[int]coordinationv1.Lease
	eventually(t, "the victim's buckets with the survivors, each in a new term", func() (bool, string) {
		after = bucketLeases(t)
		for b, l := range before {
			if holderOf(l) != victim.Name() {
				continue
			}
			if h := holderOf(after[b]); h == victim.Name() || h == "" {
				return false, fmt.Sprintf("bucket %d still with %q", b, h)
			} else if *after[b].Spec.LeaseTransitions <= *l.Spec.LeaseTransitions {
				return false, fmt.Sprintf("bucket %d moved to %s without a new term", b, h)
			}
		}
		return true, ""
	})
	t.Logf("the victim's buckets moved %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if err := fleetsim.WaitSynced(context.Background(), f.fc, shardNS, shardClusters*len(shardSources), time.Minute); err != nil {
		t.Fatal(err)
	}
	if handedOver := noOverlap(t, after); handedOver == 0 {
		t.Error("no Cluster was written by two replicas: the overlap check checked nothing")
	}
	f.replicas = survivors
	// Back to three for the next part: the victim's Pod comes back under
	// its name; the survivors hold its old buckets by now, and it gets its
	// share back by rendezvous and release, like any new member.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := victim.Start(ctx); err != nil {
		t.Fatalf("restarting %s: %v", victim.Name(), err)
	}
	f.replicas = append(f.replicas, victim)
	waitSettled(t, f.replicas...)
}

// noOverlap checks, per test Cluster, that the spans of each writer's
// writes (first received to last completed, by the downstream
// kube-apiserver) never overlap, and that a writer's span after another's
// starts after the current holder's term began (its Lease's acquireTime;
// one host, one clock). It returns how many Clusters two replicas wrote.
func noOverlap(t *testing.T, leases map[int]coordinationv1.Lease) (handedOver int) {
	minGap := time.Duration(1 << 62)
	defer func() {
		if handedOver > 0 {
			t.Logf("%d Clusters written by two replicas; shortest gap between the last write of one and the first of the next: %s", handedOver, minGap)
		} else {
			t.Logf("no Cluster written by two replicas: the victim had finished its writes")
		}
	}()
	for i, writes := range shardWrites(t) {
		spans := writers(writes)
		if len(spans) == 2 {
			handedOver++
			var s [][2]time.Time
			for _, sp := range spans {
				s = append(s, sp)
			}
			if s[1][0].Before(s[0][0]) {
				s[0], s[1] = s[1], s[0]
			}
			minGap = min(minGap, s[1][0].Sub(s[0][1]))
		}
		for a, sa := range spans {
			for b, sb := range spans {
				if a < b && sa[0].Before(sb[1]) && sb[0].Before(sa[1]) {
					t.Errorf("Cluster %s written by %s (%s to %s) and %s (%s to %s) at overlapping times", shardCluster(i),
						a, sa[0].Format(time.StampMicro), sa[1].Format(time.StampMicro), b, sb[0].Format(time.StampMicro), sb[1].Format(time.StampMicro))
				}
			}
		}
		l := leases[sharding.Bucket(shardNS, shardCluster(i), sharding.DefaultBuckets)]
		holder, acquired := holderOf(l), l.Spec.AcquireTime
		if len(spans) < 2 || acquired == nil {
			continue
		}
		for ua, s := range spans {
			if ua != "courier/"+holder && s[1].After(acquired.Time) {
				t.Errorf("Cluster %s: %s wrote until %s, after %s's term began at %s", shardCluster(i), ua,
					s[1].Format(time.StampMicro), holder, acquired.Format(time.StampMicro))
			}
		}
	}
	return handedOver
}

// currentOf counts holder's test Clusters and those of them whose
// copies both hold value, read live.
func (f *shardFleet) currentOf(t *testing.T, own map[int]string, holder, value string) (current, total int) {
	for i, o := range own {
		if o != holder {
			continue
		}
		total++
		if f.holdsValue(t, i, value) {
			current++
		}
	}
	return current, total
}

// holdsValue reads Cluster i's copies live: both hold value.
func (f *shardFleet) holdsValue(t *testing.T, i int, value string) bool {
	kube, err := kubernetes.NewForConfig(env.Downstreams[(i-1)%len(env.Downstreams)].Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range shardSources {
		s, err := kube.CoreV1().Secrets(shardDest(i)).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || string(s.Data[shardKey]) != value {
			return false
		}
	}
	return true
}

// scaleDownAndUp stops two replicas (SIGTERM), waits until the third
// holds every bucket, starts them again and waits until the buckets are
// shared again: no write reaches a test Cluster meanwhile (every copy is
// current), and every copy is still there.
func (f *shardFleet) scaleDownAndUp(t *testing.T) {
	before, ownBefore := shardWrites(t), owners(t)
	stopped, stay := f.replicas[:2], f.replicas[2]
	base := wholePassCounts(t, stay) // the stopped ones come back as new processes, from 0
	for _, r := range stopped {
		r.Stop()
	}
	waitSettled(t, stay)
	t.Logf("1 replica: %s holds all %d buckets", stay.Name(), sharding.DefaultBuckets)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, r := range stopped {
		if err := r.Start(ctx); err != nil {
			t.Fatalf("starting %s again: %v", r.Name(), err)
		}
	}
	waitSettled(t, f.replicas...)
	t.Logf("3 replicas again: buckets shared by rendezvous")
	// Each gained Cluster gets a whole pass: the one left passed over the
	// others' while alone, the restarted ones over those they hold now.
	want := map[string]float64{}
	for _, o := range ownBefore {
		if o != stay.Name() {
			want[stay.Name()]++
		}
	}
	for _, o := range owners(t) {
		if o != stay.Name() {
			want[o]++
		}
	}
	waitPassesRan(t, f.replicas, base, want)
	after := shardWrites(t)
	for i := 1; i <= shardClusters; i++ {
		if extra := after[i][len(before[i]):]; len(extra) != 0 {
			var s []string
			for _, w := range extra {
				s = append(s, w.String()+" by "+w.UserAgent)
			}
			t.Errorf("Cluster %s: writes to current copies while scaling: %q", shardCluster(i), s)
		}
		if !f.holdsValue(t, i, "r1") {
			t.Errorf("Cluster %s: a copy is missing or not current after scaling", shardCluster(i))
		}
	}
	if err := fleetsim.WaitSynced(context.Background(), f.fc, shardNS, shardClusters*len(shardSources), time.Minute); err != nil {
		t.Fatal(err)
	}
}
