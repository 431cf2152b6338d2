package copyview

// Hand-written fakes for the controller's tests: an engine that records
// what it is told and answers with statuses and leftovers the test sets,
// and a fixture that plays the informers (update the cache, then call the
// handler, as an informer does) and runs the queue in the test's goroutine.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/memstore"
)

// fakeEngine records the calls the view makes ("set <helmop> <n rows>",
// "complete") and answers Status and Leftovers from what the test set.
type fakeEngine struct {
	mu    sync.Mutex
	calls []string
	// refuseUpdates makes UpdateDesired answer false, as an engine that
	// cannot take a HelmOp's rows one by one.
	refuseUpdates bool
	statuses      map[string]copycontract.Status
	leftovers     map[types.NamespacedName][]copycontract.Leftover
	// desired are the row names each HelmOp was last handed over with.
	desired map[types.NamespacedName][]string
	// elsewhere are the Clusters another replica delivers to; it
	// delivers to every other.
	elsewhere map[string]bool
	// unswept are the Clusters whose leftovers it has not found yet.
	unswept map[string]bool
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{statuses: map[string]copycontract.Status{}, leftovers: map[types.NamespacedName][]copycontract.Leftover{},
		desired: map[types.NamespacedName][]string{}}
}

func (f *fakeEngine) SetDesired(op types.NamespacedName, rows []*courier.DownstreamCopy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("set %s %d", op, len(rows)))
	var names []string
	for _, r := range rows {
		if courier.Delivered(r.Labels) {
			names = append(names, r.Name)
		}
	}
	f.desired[op] = names
}

// desiredOf returns the names of the delivered rows op was last handed
// over with: the copies the engine writes (a Denied row is handed over
// too, for the engine to remove its copy, and is not among them).
func (f *fakeEngine) desiredOf(op types.NamespacedName) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.desired[op])
}

func (f *fakeEngine) UpdateDesired(op types.NamespacedName, rows []*courier.DownstreamCopy) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuseUpdates {
		f.calls = append(f.calls, fmt.Sprintf("update %s %d refused", op, len(rows)))
		return false
	}
	f.calls = append(f.calls, fmt.Sprintf("update %s %d", op, len(rows)))
	return true
}

func (f *fakeEngine) DesiredComplete() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "complete")
}

func (f *fakeEngine) Status(key string) (copycontract.Status, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.statuses[key]
	return s, ok
}

func (f *fakeEngine) Delivers(clusterKey string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.elsewhere[clusterKey]
}

// LeftoversKnown: the fake has swept every Cluster but those in unswept.
func (f *fakeEngine) LeftoversKnown(clusterKey string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.unswept[clusterKey]
}

func (f *fakeEngine) setElsewhere(clusterKey string, elsewhere bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.elsewhere == nil {
		f.elsewhere = map[string]bool{}
	}
	f.elsewhere[clusterKey] = elsewhere
}

func (f *fakeEngine) Leftovers(op types.NamespacedName) []copycontract.Leftover {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.leftovers[op])
}

func (f *fakeEngine) setStatus(key string, s copycontract.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[key] = s
}

// forgetStatus drops the record of row key, as an engine that never
// passed over (or dropped) its Cluster has none.
func (f *fakeEngine) forgetStatus(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.statuses, key)
}

func (f *fakeEngine) setLeftovers(op types.NamespacedName, ls ...copycontract.Leftover) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leftovers[op] = ls
}

// takeCalls returns the calls since the last take, sorted.
func (f *fakeEngine) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// fixture is a controller over caches the test changes, with a fake engine.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	caches *caches
	engine *fakeEngine
	store  *memstore.Store[*courier.DownstreamCopy]
	c      *Controller
}

// newFixture builds a controller over objs and runs its first pass.
func newFixture(t testing.TB, objs ...any) *fixture {
	t.Helper()
	return newRecordingFixture(t, Events{}, objs...)
}

// newRecordingFixture is newFixture recording Events as events says.
func newRecordingFixture(t testing.TB, events Events, objs ...any) *fixture {
	t.Helper()
	return newFixtureWith(t, events, nil, objs...)
}

// newFixtureWith is newRecordingFixture with inputs changed by with (nil
// changes nothing) before the controller is built.
func newFixtureWith(t testing.TB, events Events, with func(*caches, *Inputs), objs ...any) *fixture {
	t.Helper()
	f := &fixture{t: t, caches: newCaches(t, objs...), engine: newFakeEngine(),
		store: memstore.New[*courier.DownstreamCopy](memstore.WithInitialResourceVersion(1000))}
	_, f.ctx = ktesting.NewTestContext(t)
	in := f.caches.inputs()
	if with != nil {
		with(f.caches, &in)
	}
	f.c = newController(in, f.store, f.engine, f.caches.helmOps)
	f.c.bundles = f.caches.bundles
	f.c.recorder = events.Recorder
	f.c.leading.Store(!events.Follower)
	if err := f.c.queueAll(); err != nil {
		t.Fatal(err)
	}
	f.drain()
	if !f.c.Ready() {
		t.Fatal("not ready after the first pass")
	}
	return f
}

// drain processes everything queued, in the test's goroutine.
func (f *fixture) drain() {
	for f.c.queue.Len() > 0 {
		f.c.processNext(f.ctx)
	}
}

// handler returns the controller's handler for objects like o.
func (f *fixture) handler(o any) cache.ResourceEventHandler {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	switch o := o.(type) {
	case *fleet.HelmOp:
		return f.c.helmOpEvents()
	case *fleet.Bundle:
		return f.c.bundleEvents()
	case *fleet.Cluster:
		return f.c.clusterEvents()
	case *fleet.ClusterGroup:
		return f.c.clusterGroupEvents()
	case *metav1.PartialObjectMetadata:
		return f.c.sourceEvents(o.Kind)
	}
	panic(fmt.Sprintf("unexpected object %T", o))
}

// add, update and remove change the cache, then tell the controller, as
// an informer does.
func (f *fixture) add(o any) {
	f.t.Helper()
	if err := f.caches.indexerFor(o).Add(o); err != nil {
		f.t.Fatal(err)
	}
	f.handler(o).OnAdd(o, false)
}

func (f *fixture) update(old, o any) {
	f.t.Helper()
	if err := f.caches.indexerFor(o).Update(o); err != nil {
		f.t.Fatal(err)
	}
	f.handler(o).OnUpdate(old, o)
}

func (f *fixture) remove(o any) {
	f.t.Helper()
	obj := o
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if err := f.caches.indexerFor(obj).Delete(obj); err != nil {
		f.t.Fatal(err)
	}
	f.handler(o).OnDelete(o)
}

// rv is the store's current resourceVersion: it advances by one per row
// written or deleted.
func (f *fixture) rv() uint64 {
	f.t.Helper()
	_, rv := f.store.List("", nil)
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// rows returns the stored rows by name.
func (f *fixture) rows() map[string]*courier.DownstreamCopy {
	items, _ := f.store.List("", nil)
	out := map[string]*courier.DownstreamCopy{}
	for _, r := range items {
		out[r.Name] = r
	}
	return out
}

// row returns one stored row, failing the test if there is none.
func (f *fixture) row(name string) *courier.DownstreamCopy {
	f.t.Helper()
	r, ok := f.store.Get("fleet-default", name)
	if !ok {
		f.t.Fatalf("no row %s; rows: %v", name, slices.Sorted(maps.Keys(f.rows())))
	}
	return r
}

// watch watches the store from now on.
func (f *fixture) watch() watch.Interface {
	f.t.Helper()
	w, err := f.store.Watch(f.ctx, "", nil, &metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(f.rv(), 10)},
		func() *courier.DownstreamCopy { return &courier.DownstreamCopy{} })
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(w.Stop)
	return w
}

// nextEvents returns the events already delivered to w: the store puts an
// event in the result channel before the write returns.
func nextEvents(w watch.Interface) []string {
	var out []string
	for {
		select {
		case ev := <-w.ResultChan():
			r := ev.Object.(*courier.DownstreamCopy)
			out = append(out, fmt.Sprintf("%s %s %s", ev.Type, r.Name, r.Status.Phase))
		default:
			return out
		}
	}
}
