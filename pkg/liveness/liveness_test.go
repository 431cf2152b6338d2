package liveness

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

const ns = "courier-system"

var edge1 = types.NamespacedName{Namespace: "ws", Name: "edge1"}

// fixture is one replica's Tracker, replica-a, over a fake clientset
// whose ConfigMap writes it counts.
type fixture struct {
	t            *testing.T
	client       *fake.Clientset
	live         *Tracker
	clock        *clocktesting.FakeClock
	digestWrites atomic.Int32
	rv           atomic.Int32
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(), clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))}
	f.client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			// The fake tracker keeps no resourceVersions; the informer
			// needs new ones to see updates.
			obj := a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ConfigMap)
			if a.GetVerb() == "update" {
				if _, err := f.client.Tracker().Get(a.GetResource(), ns, obj.Name); err != nil {
					return false, nil, nil // 404 from the tracker, not a write
				}
			}
			if obj.Labels[Label] == "true" {
				f.digestWrites.Add(1)
			}
			obj.ResourceVersion = fmt.Sprint(f.rv.Add(1))
		}
		return false, nil, nil
	})
	inf := NewInformer(f.client, ns, 0)
	live, err := New(Options{Namespace: ns, Identity: "replica-a", Client: f.client.CoreV1(), Informer: inf, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.live = live
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return f
}

// TestDigestWrites: a replica's digest is written only as often as
// readers need (a record RefreshIntervals old), however many heartbeats
// come, and at most once per MinDigestPeriod.
func TestDigestWrites(t *testing.T) {
	cases := []struct {
		name     string
		interval time.Duration
		clusters int
		beats    int // heartbeats per Cluster, one per interval
		max      int32
	}{
		// The first write, then one per two intervals: 20s at 2s.
		{"one agent at 2s for 20s", 2 * time.Second, 1, 10, 6},
		{"one agent at 30s for 10 minutes", 30 * time.Second, 1, 20, 11},
		// Many Clusters still cost at most one write per digest (16 of
		// them) and interval, not one per heartbeat: 16 × (20 + 1).
		{"50 agents at 30s for 10 minutes", 30 * time.Second, 50, 20, DigestShards * 21},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			// The agents' heartbeats are spread over the interval, each
			// agent at its own phase.
			step := tc.interval / time.Duration(tc.clusters)
			for range tc.beats {
				for i := range tc.clusters {
					f.clock.Step(step)
					f.live.Heard(types.NamespacedName{Namespace: "ws", Name: fmt.Sprintf("edge%d", i)}, tc.interval)
					for range int(step / Tick) {
						f.live.writeDue(ctx, false)
					}
					f.live.writeDue(ctx, false)
				}
			}
			n := f.digestWrites.Load()
			if n > tc.max || n == 0 {
				t.Errorf("%d heartbeats: %d digest writes, want 1..%d", tc.beats*tc.clusters, n, tc.max)
			}
			t.Logf("%d heartbeats of %d agents at %s: %d digest writes", tc.beats*tc.clusters, tc.clusters, tc.interval, n)
		})
	}
}

// foreignDigest is another replica's digest holding one record of edge1.
func foreignDigest(replica string, heardAt time.Time, interval time.Duration) *corev1.ConfigMap {
	return newDigest(ns, replica, digestShard(edge1), map[types.NamespacedName]heard{edge1: {at: heardAt, interval: interval}})
}

// TestRestartWritesNoDigestAtOnce: a new replica that reads a fresh
// record of a Cluster in another's digest does not write its own until
// that record is RefreshIntervals old, and a final flush writes what it
// heard.
func TestRestartWritesNoDigestAtOnce(t *testing.T) {
	const iv = 30 * time.Second
	f := newFixture(t)
	if _, err := f.client.CoreV1().ConfigMaps(ns).Create(context.Background(), foreignDigest("replica-old", f.clock.Now(), iv), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the digest", func() bool { return f.live.hasDigestOf(edge1) })
	f.digestWrites.Store(0)
	f.clock.Step(iv)
	f.live.Heard(edge1, iv)
	f.live.writeDue(context.Background(), false)
	if n := f.digestWrites.Load(); n != 0 {
		t.Errorf("%d digest writes for a Cluster another digest has", n)
	}
	f.live.Flush()
	if n := f.digestWrites.Load(); n != 1 {
		t.Errorf("the final flush: %d digest writes, want 1", n)
	}
	cm, err := f.client.CoreV1().ConfigMaps(ns).Get(context.Background(), DigestName("replica-a", digestShard(edge1)), metav1.GetOptions{})
	if err != nil || !strings.HasPrefix(cm.Data[DigestKey], "ws/edge1 ") || cm.Annotations[AnnotationReplica] != "replica-a" {
		t.Fatalf("the digest: %v %v", cm, err)
	}
	if got := decodeDigest(cm.Data[DigestKey])[edge1]; !got.at.Equal(f.clock.Now()) || got.interval != iv {
		t.Errorf("record %+v, want heard now every %s", got, iv)
	}
}

// TestCleanup: another replica's digest is deleted once none of its
// records matters any more (superseded by more than three intervals);
// while one does, it stays.
func TestCleanup(t *testing.T) {
	const iv = 2 * time.Second
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client.CoreV1().ConfigMaps(ns).Create(ctx, foreignDigest("replica-gone", f.clock.Now(), iv), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the digest", func() bool { return f.live.hasDigestOf(edge1) })
	f.clock.Step(2 * iv)
	f.live.Heard(edge1, iv)
	f.live.cleanup(ctx)
	if _, err := f.client.CoreV1().ConfigMaps(ns).Get(ctx, DigestName("replica-gone", digestShard(edge1)), metav1.GetOptions{}); err != nil {
		t.Errorf("a digest whose record is two intervals behind was deleted: %v", err)
	}
	f.clock.Step(2 * iv)
	f.live.Heard(edge1, iv)
	f.live.cleanup(ctx)
	if _, err := f.client.CoreV1().ConfigMaps(ns).Get(ctx, DigestName("replica-gone", digestShard(edge1)), metav1.GetOptions{}); err == nil {
		t.Error("a digest four intervals behind was kept")
	}
}

func TestDigestRoundTrip(t *testing.T) {
	in := map[types.NamespacedName]heard{
		edge1: {at: time.UnixMilli(1764500000123), interval: 1500 * time.Millisecond},
		{Namespace: "fleet-default", Name: "c-" + strings.Repeat("x", 60)}: {at: time.UnixMilli(1764500000000), interval: time.Hour},
	}
	s := encodeDigest(in) + "bad line\nws/x 1 1\n/y 1 2000\n"
	out := decodeDigest(s)
	if len(out) != 2 || out[edge1] != in[edge1] {
		t.Errorf("decoded %v from %q", out, s)
	}
	if id := NewIdentity("Courier_API.7f9c"); !strings.HasPrefix(id, "courier-api-7f9c-") || len(id) != len("courier-api-7f9c-")+8 {
		t.Errorf("identity %q", id)
	}
}

// hasDigestOf reports whether some digest holds a record of c.
func (l *Tracker) hasDigestOf(c types.NamespacedName) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.newest[c]
	return ok
}

// TestDigestWritesAt10000Agents measures the write rules at the pull scale
// scale on one replica: 10,000 agents heartbeating every 30 s, everything
// current, for five minutes of fake time. Digest writes per second and
// the largest digest are logged (docs/scale-out.md).
func TestDigestWritesAt10000Agents(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of CPU")
	}
	const agents, iv, span = 10000, 30 * time.Second, 5 * time.Minute
	f := newFixture(t)
	ctx := context.Background()
	names := make([]types.NamespacedName, agents)
	for i := range names {
		names[i] = types.NamespacedName{Namespace: "fleet-default", Name: fmt.Sprintf("edge-%05d", i)}
	}
	start := f.clock.Now()
	var warm int32
	for elapsed := time.Duration(0); elapsed < span; elapsed += Tick {
		// Agent i beats at i·iv/agents into each interval.
		from, to := int64(elapsed%iv)*agents/int64(iv), int64((elapsed%iv)+Tick)*agents/int64(iv)
		f.clock.SetTime(start.Add(elapsed))
		for i := from; i < to && i < agents; i++ {
			f.live.Heard(names[i], iv)
		}
		f.live.writeDue(ctx, false)
		if elapsed == 2*iv {
			warm = f.digestWrites.Load()
		}
	}
	steady := f.digestWrites.Load() - warm
	perSecond := float64(steady) / (span - 2*iv).Seconds()
	biggest := 0
	list, err := f.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		biggest = max(biggest, len(cm.Data[DigestKey]))
	}
	t.Logf("%d agents every %s, one replica: %d digest writes in %s after the first two intervals = %.2f/s; %d digests, the largest %d bytes",
		agents, iv, steady, span-2*iv, perSecond, len(list.Items), biggest)
	if perSecond > float64(DigestShards)/iv.Seconds()*1.5 || biggest > 64*1024 {
		t.Errorf("over the design's bound: %.2f writes/s (want about %d/%s), largest digest %d bytes", perSecond, DigestShards, iv, biggest)
	}
}

// TestCleanupPrunesOwnRecords: a record of a Cluster no longer pulled
// leaves this replica's digest at the next cleanup, and the digest, left
// empty, is deleted.
func TestCleanupPrunesOwnRecords(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pulled := true
	f.live.o.Pulled = func(types.NamespacedName) bool { return pulled }
	f.live.Heard(edge1, 2*time.Second)
	f.live.writeDue(ctx, false)
	name := DigestName("replica-a", digestShard(edge1))
	if _, err := f.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the first record was not written: %v", err)
	}
	pulled = false
	f.live.cleanup(ctx)
	if _, err := f.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Error("the digest of a Cluster no longer pulled stayed")
	}
	// The informer may still deliver the digest's creation after the
	// delete was applied here (events arrive in order, later): the record
	// goes once the informer's delete event has come too.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, _, ok := f.live.Last(edge1)
		return !ok, nil
	}); err != nil {
		t.Error("the record stayed in memory")
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return ok(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s", what)
	}
}
