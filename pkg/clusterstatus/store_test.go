package clusterstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/liveness"
)

const ns = "courier-system"

var edge1 = types.NamespacedName{Namespace: "ws", Name: "edge1"}

// rowsOf says every row named app.<cluster>.* belongs to that cluster,
// except those listed as gone.
type rowsOf struct{ gone map[string]bool }

func (r rowsOf) ClusterOf(_, name string) (string, bool) {
	if r.gone[name] {
		return "", false
	}
	var cluster string
	if _, err := fmt.Sscanf(name, "app.%s", &cluster); err != nil {
		return "", false
	}
	for i := range cluster {
		if cluster[i] == '.' {
			return cluster[:i], true
		}
	}
	return cluster, true
}

type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	store   *Store
	live    *liveness.Tracker
	clock   *clocktesting.FakeClock
	changed chan types.NamespacedName
	// owners receives the owners OnLeftovers is told of.
	owners chan types.NamespacedName
	// writes count the accepted writes of report objects, digestWrites
	// those of liveness digests.
	writes       atomic.Int32
	digestWrites atomic.Int32
	rv           atomic.Int32
}

func newFixture(t *testing.T, rows Rows, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, rows, objs...)
}

// newFixtureWith is newFixture with the Store's options changed by with
// (nil: as they are) before New.
func newFixtureWith(t *testing.T, with func(*Options), rows Rows, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(objs...), clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		changed: make(chan types.NamespacedName, 100), owners: make(chan types.NamespacedName, 100)}
	f.client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			// The fake tracker keeps no resourceVersions; the informer
			// needs new ones to see updates.
			obj := a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ConfigMap)
			// Nor does it check them: a write from a stale read is a 409,
			// as from a kube-apiserver.
			// An update without one is unconditional, as for ConfigMaps
			// on a kube-apiserver.
			if a.GetVerb() == "update" {
				cur, err := f.client.Tracker().Get(a.GetResource(), ns, obj.Name)
				if err != nil {
					return false, nil, nil // 404 from the tracker, not a write
				}
				if obj.ResourceVersion != "" && cur.(*corev1.ConfigMap).ResourceVersion != obj.ResourceVersion {
					return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), obj.Name, fmt.Errorf("the object has been modified"))
				}
			}
			if obj.Labels[liveness.Label] == "true" {
				f.digestWrites.Add(1)
			} else {
				f.writes.Add(1) // accepted writes
			}
			obj.ResourceVersion = fmt.Sprint(f.rv.Add(1))
		}
		return false, nil, nil
	})
	inf, linf := NewInformer(f.client, ns, 0), liveness.NewInformer(f.client, ns, 0)
	onChange := func(c types.NamespacedName) {
		select {
		case f.changed <- c:
		default:
		}
	}
	live, err := liveness.New(liveness.Options{Namespace: ns, Identity: "replica-a", Client: f.client.CoreV1(), Informer: linf,
		Clock: f.clock, OnChange: onChange})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Namespace: ns, Client: f.client.CoreV1(), Informer: inf, Rows: rows, Clock: f.clock,
		OnChange: onChange, Liveness: live, OnLeftovers: func(o types.NamespacedName) { f.owners <- o }}
	if with != nil {
		with(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.store, f.live = s, live
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx.Done())
	go linf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced, linf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return f
}

func (f *fixture) record(row string, phase courier.CopyPhase, interval time.Duration) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.store.Record(ctx, edge1, row, Entry{Phase: phase, Message: "m"}, interval); err != nil {
		f.t.Fatal(err)
	}
}

// waitReport waits until the informer's report satisfies ok.
func (f *fixture) waitReport(what string, ok func(*Report) bool) *Report {
	f.t.Helper()
	var got *Report
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r, found := f.store.Report(edge1)
		got = r
		return found && ok(r), nil
	})
	if err != nil {
		f.t.Fatalf("%s: last report %+v", what, got)
	}
	return got
}

func (f *fixture) object() *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.client.CoreV1().ConfigMaps(ns).Get(context.Background(), ObjectName(edge1), metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return cm
}

func TestRecordWritesOneObjectPerCluster(t *testing.T) {
	f := newFixture(t, nil)
	f.record("app.edge1.secret.db", courier.CopyPhaseSynced, 2*time.Second)
	cm := f.object()
	if cm.Labels[Label] != "true" || cm.Annotations[AnnotationClusterNamespace] != "ws" || cm.Annotations[AnnotationCluster] != "edge1" {
		t.Errorf("labels %v annotations %v", cm.Labels, cm.Annotations)
	}
	var hb Heartbeat
	if err := json.Unmarshal([]byte(cm.Data[HeartbeatKey]), &hb); err != nil || hb.Interval.Duration != 2*time.Second || !hb.LastHeard.Time.Equal(f.clock.Now()) {
		t.Errorf("heartbeat %s: %+v %v", cm.Data[HeartbeatKey], hb, err)
	}
	r := f.waitReport("the row's entry", func(r *Report) bool { return r.Rows["app.edge1.secret.db"].Phase == courier.CopyPhaseSynced })
	if want := f.clock.Now().Add(6 * time.Second); !r.Deadline().Equal(want) {
		t.Errorf("deadline %s, want %s", r.Deadline(), want)
	}
	select {
	case c := <-f.changed:
		if c != edge1 {
			t.Errorf("OnChange(%s)", c)
		}
	case <-time.After(5 * time.Second):
		t.Error("OnChange was not called")
	}
}

func TestConcurrentReportsCoalesce(t *testing.T) {
	f := newFixture(t, nil)
	f.record("app.edge1.secret.s0", courier.CopyPhasePending, 30*time.Second)
	f.waitReport("first report", func(r *Report) bool { return len(r.Rows) == 1 })
	f.writes.Store(0)

	// The next write blocks until released; the nine reports that come
	// meanwhile must share one write.
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(started); <-release })
		return false, nil, nil
	})
	var wg sync.WaitGroup
	wg.Go(func() { f.record("app.edge1.secret.s1", courier.CopyPhaseSynced, 30*time.Second) })
	<-started
	for i := 2; i <= 10; i++ {
		wg.Go(func() { f.record(fmt.Sprintf("app.edge1.secret.s%d", i), courier.CopyPhaseSynced, 30*time.Second) })
	}
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.store.wmu.Lock()
		defer f.store.wmu.Unlock()
		q := f.store.queues[edge1]
		return q != nil && q.next != nil && len(q.next.rows) == 9, nil
	})
	if err != nil {
		t.Fatal("the nine reports did not join one batch")
	}
	close(release)
	wg.Wait()
	if n := f.writes.Load(); n != 2 {
		t.Errorf("ten reports, one in flight: %d writes, want 2", n)
	}
	if got := len(f.object().Data); got != 12 { // 11 rows and the heartbeat
		t.Errorf("%d keys upstream, want 12", got)
	}
}

func TestConflictIsRetriedOnAFreshRead(t *testing.T) {
	f := newFixture(t, nil)
	f.record("app.edge1.secret.a", courier.CopyPhaseSynced, 30*time.Second)
	f.waitReport("first report", func(r *Report) bool { return len(r.Rows) == 1 })
	// Another replica writes row b; this replica's cache may not have it.
	other := f.object().DeepCopy()
	other.Data["app.edge1.secret.b"] = `{"phase":"Forbidden"}`
	var conflicts atomic.Int32
	f.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(1) == 1 {
			if err := f.client.Tracker().Update(a.GetResource(), other, ns); err != nil {
				t.Error(err)
			}
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), other.Name, fmt.Errorf("the object has been modified"))
		}
		return false, nil, nil
	})
	f.record("app.edge1.secret.c", courier.CopyPhaseConflict, 30*time.Second)
	data := f.object().Data
	for _, row := range []string{"app.edge1.secret.a", "app.edge1.secret.b", "app.edge1.secret.c"} {
		if data[row] == "" {
			t.Errorf("after a 409 and a retry, %s is missing: %v", row, data)
		}
	}
	if conflicts.Load() != 2 {
		t.Errorf("%d update attempts, want 2", conflicts.Load())
	}
}

func TestEntriesOfGoneRowsArePruned(t *testing.T) {
	rows := rowsOf{gone: map[string]bool{}}
	f := newFixture(t, rows)
	f.record("app.edge1.secret.a", courier.CopyPhaseSynced, 30*time.Second)
	f.record("app.edge1.secret.b", courier.CopyPhaseSynced, 30*time.Second)
	f.waitReport("both rows", func(r *Report) bool { return len(r.Rows) == 2 })
	rows.gone["app.edge1.secret.a"] = true
	f.record("app.edge1.secret.b", courier.CopyPhaseConflict, 30*time.Second)
	data := f.object().Data
	if _, ok := data["app.edge1.secret.a"]; ok || data["app.edge1.secret.b"] == "" {
		t.Errorf("after row a went: %v", data)
	}
}

func TestDeletedObjectForgetsReport(t *testing.T) {
	f := newFixture(t, nil)
	f.record("app.edge1.secret.a", courier.CopyPhaseSynced, 30*time.Second)
	f.waitReport("a report", func(r *Report) bool { return len(r.Rows) == 1 })
	if err := f.store.Delete(context.Background(), edge1); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		// The heartbeat stays in Liveness (until its Cluster is no
		// longer pulled); the rows go with the object.
		r, ok := f.store.Report(edge1)
		return !ok || len(r.Rows) == 0, nil
	})
	if err != nil {
		t.Error("the report stayed after its object was deleted")
	}
	if err := f.store.Delete(context.Background(), edge1); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
}

// gatedWrites is a ConfigMapsGetter whose creates and updates each wait
// for a token from gate, counting the writes started and in flight and
// the most ever in flight at once. (The fake clientset runs its reactors
// under one lock, so a reactor cannot hold writes in flight together.)
type gatedWrites struct {
	typedcorev1.ConfigMapsGetter
	gate                    chan struct{}
	started, inFlight, peak atomic.Int32

	mu     sync.Mutex
	byName map[string]int // writes started, by object name
}

func (g *gatedWrites) ConfigMaps(namespace string) typedcorev1.ConfigMapInterface {
	return gatedConfigMaps{ConfigMapInterface: g.ConfigMapsGetter.ConfigMaps(namespace), g: g}
}

func (g *gatedWrites) hold(name string) func() {
	g.mu.Lock()
	g.byName[name]++
	g.started.Add(1)
	g.peak.Store(max(g.peak.Load(), g.inFlight.Add(1))) // every rise is under mu
	g.mu.Unlock()
	<-g.gate
	return func() { g.inFlight.Add(-1) }
}

type gatedConfigMaps struct {
	typedcorev1.ConfigMapInterface
	g *gatedWrites
}

func (c gatedConfigMaps) Create(ctx context.Context, cm *corev1.ConfigMap, o metav1.CreateOptions) (*corev1.ConfigMap, error) {
	defer c.g.hold(cm.Name)()
	return c.ConfigMapInterface.Create(ctx, cm, o)
}

func (c gatedConfigMaps) Update(ctx context.Context, cm *corev1.ConfigMap, o metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	defer c.g.hold(cm.Name)()
	return c.ConfigMapInterface.Update(ctx, cm, o)
}

// Writes of many Clusters at once keep at most MaxWrites in flight: the
// others wait for a slot, gathering their changes
// meanwhile, and every one is written.
func TestWritesInFlightAreBounded(t *testing.T) {
	const clusters, slots = 6, 2
	g := &gatedWrites{gate: make(chan struct{}, 2*clusters), byName: map[string]int{}}
	f := newFixtureWith(t, func(o *Options) {
		g.ConfigMapsGetter = o.Client
		o.Client, o.MaxWrites = g, slots
	}, nil)
	cluster := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "ws", Name: fmt.Sprintf("edge%d", i)}
	}
	for i := range clusters {
		f.store.Publish(cluster(i), tenRows("1"), nil)
	}
	waitFor(t, "two writes in flight", func() bool { return g.inFlight.Load() >= slots })
	// Every Cluster's writer has started (Publish starts them); the four
	// without a slot change again while they wait: still one write each.
	for i := range clusters {
		f.store.Publish(cluster(i), tenRows("2"), nil)
	}
	if n := g.started.Load(); n != slots {
		t.Fatalf("%d writes started with %d slots held", n, slots)
	}
	for range 2 * clusters {
		g.gate <- struct{}{}
	}
	for i := range clusters {
		waitFor(t, cluster(i).Name+"'s second status upstream", func() bool {
			r, ok := f.store.Report(cluster(i))
			return ok && r.Rows["app.edge1.secret.s0"].SyncedResourceVersion == "2"
		})
	}
	if p := g.peak.Load(); p != slots {
		t.Errorf("%d writes were in flight at once, want at most %d", p, slots)
	}
	// The four that waited wrote once, with both changes. (The two that
	// held slots wrote again, as a create that can meet its first write
	// not yet in the informer, and then an update.)
	g.mu.Lock()
	defer g.mu.Unlock()
	once := 0
	for _, n := range g.byName {
		if n == 1 {
			once++
		}
	}
	if len(g.byName) != clusters || once != clusters-slots {
		t.Errorf("writes started by object: %v; want %d objects, %d of them written once", g.byName, clusters, clusters-slots)
	}
}
