package copyview

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/memstore"
)

// fakeListWatch is a hand-written ListerWatcher: it lists the objects it
// was given, then hands out one watch whose events the test sends. Events
// sent on one watch reach the informer's handlers in order.
type fakeListWatch struct {
	items []runtime.Object
	w     *watch.FakeWatcher
}

func newFakeListWatch(items ...runtime.Object) *fakeListWatch {
	return &fakeListWatch{items: items, w: watch.NewFakeWithChanSize(16, false)}
}

func (f *fakeListWatch) List(metav1.ListOptions) (runtime.Object, error) {
	l := &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for _, o := range f.items {
		l.Items = append(l.Items, runtime.RawExtension{Object: o})
	}
	return l, nil
}

func (f *fakeListWatch) Watch(metav1.ListOptions) (watch.Interface, error) { return f.w, nil }

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (f *fakeListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// NewController wires the informers' events to the HelmOps they affect,
// and Run makes the view ready once every HelmOp's rows are stored. Then a
// listed Secret's change, sent right after one no HelmOp lists, recomputes
// only the HelmOp that lists it, and a status change writes one row.
func TestRun(t *testing.T) {
	objs := map[string][]runtime.Object{}
	for _, o := range workspaces() {
		var k string
		switch o := o.(type) {
		case *fleet.HelmOp:
			k = "helmops"
		case *fleet.Cluster:
			k = "clusters"
		case *fleet.ClusterGroup:
			k = "groups"
		case *metav1.PartialObjectMetadata:
			k = o.Kind
		}
		objs[k] = append(objs[k], o.(runtime.Object))
	}
	lws := map[string]*fakeListWatch{}
	informer := func(k string, example runtime.Object) cache.SharedIndexInformer {
		lws[k] = newFakeListWatch(objs[k]...)
		return cache.NewSharedIndexInformer(lws[k], example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	infs := Informers{
		HelmOps:       informer("helmops", &fleet.HelmOp{}),
		Clusters:      informer("clusters", &fleet.Cluster{}),
		ClusterGroups: informer("groups", &fleet.ClusterGroup{}),
		Secrets:       informer("Secret", &metav1.PartialObjectMetadata{}),
		ConfigMaps:    informer("ConfigMap", &metav1.PartialObjectMetadata{}),
	}
	caches := &caches{helmOps: infs.HelmOps.GetIndexer(), clusters: infs.Clusters.GetIndexer(), groups: infs.ClusterGroups.GetIndexer(),
		secrets: infs.Secrets.GetIndexer(), configMaps: infs.ConfigMaps.GetIndexer()}
	store := memstore.New[*courier.DownstreamCopy]()
	engine := newFakeEngine()
	c, err := NewController(caches.inputs(), store, engine, infs, Events{})
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, inf := range []cache.SharedIndexInformer{infs.HelmOps, infs.Clusters, infs.ClusterGroups, infs.Secrets, infs.ConfigMaps} {
		go inf.RunWithContext(ctx)
	}
	go c.Run(ctx)

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("the view to be ready", c.Ready)
	if items, _ := store.List("", nil); len(items) != 5 {
		t.Errorf("%d rows when ready, want 5", len(items))
	}
	if calls := engine.takeCalls(); !slices.Equal(calls, []string{"complete", "set fleet-default/app 2", "set fleet-default/idle 0",
		"set fleet-default/web 2", "set other/far 1"}) {
		t.Errorf("engine calls in the first pass: %q", calls)
	}

	creds := withRV(source("Secret", "creds", "1"), "9")
	lws["Secret"].w.Add(source("Secret", "unrelated", "8"))
	lws["Secret"].w.Modify(creds)
	waitFor("the new source resourceVersion in the rows", func() bool {
		r1, ok1 := store.Get("fleet-default", "app.c1.secret.creds")
		r2, ok2 := store.Get("fleet-default", "app.c2.secret.creds")
		return ok1 && ok2 && r1.Spec.Source.ResourceVersion == "9" && r2.Spec.Source.ResourceVersion == "9"
	})
	// The unrelated Secret's event was handled before the listed one's:
	// had it queued a HelmOp, that HelmOp would have been synced by now.
	if calls := engine.takeCalls(); !slices.Equal(calls, []string{"update fleet-default/app 2"}) {
		t.Errorf("engine calls after an unrelated and a listed Secret changed: %q, want app only", calls)
	}

	_, rv := store.List("", nil)
	engine.setStatus("fleet-default/web.c2.configmap.settings", copycontract.Status{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "2"})
	c.StatusChanged([]copycontract.StatusChange{{HelmOp: webOp, Rows: []string{"fleet-default/web.c2.configmap.settings"}}})
	waitFor("the row's new status", func() bool {
		r, ok := store.Get("fleet-default", "web.c2.configmap.settings")
		return ok && r.Status.Phase == courier.CopyPhaseSynced
	})
	if r, _ := store.Get("fleet-default", "web.c2.configmap.settings"); r.ResourceVersion != nextRV(t, rv) {
		t.Errorf("the status change stored resourceVersion %s, want %s: exactly one write", r.ResourceVersion, nextRV(t, rv))
	}
	if calls := engine.takeCalls(); len(calls) != 0 {
		t.Errorf("a status change recomputed rows: %q", calls)
	}
}

func nextRV(t *testing.T, rv string) string {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(n+1, 10)
}
