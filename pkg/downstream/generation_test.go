package downstream

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// A shared set starts wide, narrows to its members' values once they are
// quiet if it holds others' copies, and is rebuilt for a member it does not select; its members read
// their copies and hear of their changes throughout, and a member newly
// covered is queued at the swap.
func TestSharedWatchNarrowsToItsMembers(t *testing.T) {
	settle, join := settleDelay, joinDelay
	settleDelay, joinDelay = 200*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { settleDelay, joinDelay = settle, join })

	settling, rebuilds := gaugeValue(t, watchSetsSettling), counterValue(t, watchRebuilds)
	fk := &fakes{}
	src := newSource(kcSecret("ns", "kc", "1", "https://shared"))
	changes := &onChanges{}
	c := NewCache(src, Options{WatchSelector: managed, ShareLabel: "for", NewClientset: fk.newClientset, OnChange: changes.record})
	t.Cleanup(c.Stop)
	sels := fakeServer(fk, "https://shared")
	seen := func(sel string) bool {
		sels.mu.Lock()
		defer sels.mu.Unlock()
		return sels.seen[sel] > 0
	}
	ctx := context.Background()
	get := func(name string) *Client {
		t.Helper()
		cl, err := c.Get(ctx, cluster("ns", name, "kc", ""))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	create := func(cl *Client, s *corev1.Secret) {
		t.Helper()
		if _, err := cl.Kube.CoreV1().Secrets("app").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	c1, c2 := get("c1"), get("c2")
	waitFor(t, "the wide watch", func() bool { return seen("courier.dev/managed-by=courier,for") && c1.HasSynced() })
	create(c1, copyFor("app", "a", "c1"))
	create(c1, copyFor("app", "x", "c9")) // a Cluster another replica delivers to
	waitFor(t, "the narrow watch of c1 and c2", func() bool { return seen("courier.dev/managed-by=courier,for in (c1,c2)") })
	waitFor(t, "the narrow generation in use", func() bool { return c1.set.gen.Load().values != nil && c1.HasSynced() && c2.HasSynced() })
	if s, err := c1.Secrets.Secrets("app").Get("a"); err != nil || s.Name != "a" {
		t.Fatalf("c1 reads its copy through the narrow watch: %v, %v", s, err)
	}
	create(c2, copyFor("app", "b", "c2"))
	waitFor(t, "c2 hears of its copy through the narrow watch", func() bool { return slices.Contains(changes.get(), "ns/c2") })

	// A member the narrow watch does not select.
	c3 := get("c3")
	if c3.set != c1.set {
		t.Fatal("c3 on the same connection has a set of its own")
	}
	waitFor(t, "the watch of c1, c2 and c3", func() bool { return seen("courier.dev/managed-by=courier,for in (c1,c2,c3)") })
	waitFor(t, "c3 synced", c3.HasSynced)
	waitFor(t, "c3 queued at the swap", func() bool { return slices.Contains(changes.get(), "ns/c3 nil") })
	create(c3, copyFor("app", "c", "c3"))
	waitFor(t, "c3 reads its copy", func() bool { _, err := c3.Secrets.Secrets("app").Get("c"); return err == nil })
	if l, _ := c1.Secrets.List(labels.Everything()); len(l) != 1 || l[0].Name != "a" {
		t.Errorf("c1 lists %v after the rebuild, want its copy a", l)
	}
	waitFor(t, "the set settled", func() bool { return gaugeValue(t, watchSetsSettling) == settling })
	if got := counterValue(t, watchRebuilds) - rebuilds; got != 2 {
		t.Errorf("%v watch rebuilds counted, want 2 (narrowed, then widened to c3)", got)
	}
}

// A shared set counts as settling from its start until a settle check
// has run, and no longer once it stops.
func TestSharedWatchSettlingIsCounted(t *testing.T) {
	settle := settleDelay
	settleDelay = time.Hour
	t.Cleanup(func() { settleDelay = settle })

	before := gaugeValue(t, watchSetsSettling)
	fk := &fakes{}
	src := newSource(kcSecret("ns", "kc", "1", "https://unsettled"))
	c := NewCache(src, Options{WatchSelector: managed, ShareLabel: "for", NewClientset: fk.newClientset, OnChange: (&onChanges{}).record})
	fakeServer(fk, "https://unsettled")
	if _, err := c.Get(context.Background(), cluster("ns", "c1", "kc", "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new set counted as settling", func() bool { return gaugeValue(t, watchSetsSettling) == before+1 })
	c.Stop()
	if got := gaugeValue(t, watchSetsSettling); got != before {
		t.Errorf("%v sets settling after the set stopped, want %v", got, before)
	}
}

// gaugeValue and counterValue read one of the package's metrics.
func gaugeValue(t *testing.T, g metrics.GaugeMetric) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(g)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func counterValue(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A shared set that holds only its members' copies is never rebuilt: in a
// fleet of one Cluster per kube-apiserver narrowing would buy nothing.
func TestSharedWatchOfItsMembersOnlyStaysAsItIs(t *testing.T) {
	settle := settleDelay
	settleDelay = 50 * time.Millisecond
	t.Cleanup(func() { settleDelay = settle })

	fk := &fakes{}
	src := newSource(kcSecret("ns", "kc", "1", "https://own"))
	c := NewCache(src, Options{WatchSelector: managed, ShareLabel: "for", NewClientset: fk.newClientset, OnChange: (&onChanges{}).record})
	t.Cleanup(c.Stop)
	sels := fakeServer(fk, "https://own", copyFor("app", "a", "c1"))
	c1, err := c.Get(context.Background(), cluster("ns", "c1", "kc", ""))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c1 synced", c1.HasSynced)
	waitFor(t, "three settle checks", func() bool { return c1.set.settled.Load() >= 3 })
	if c1.set.gen.Load().values != nil {
		t.Error("the set holding only c1's copies was narrowed")
	}
	sels.mu.Lock()
	defer sels.mu.Unlock()
	for sel := range sels.seen {
		if sel != "courier.dev/managed-by=courier,for" {
			t.Errorf("selected %q: the set was rebuilt", sel)
		}
	}
}

// fakeServer gives host a fake clientset holding objs, and records the
// label selectors its lists and watches are made with.
func fakeServer(fk *fakes, host string, objs ...runtime.Object) *selectorLog {
	fk.mu.Lock()
	defer fk.mu.Unlock()
	if fk.sets == nil {
		fk.sets = map[string]*fake.Clientset{}
	}
	fk.sets[host] = fake.NewClientset(objs...)
	return recordSelectors(fk.sets[host])
}
