package agentwatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/server/routine"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/install"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	rows   = v1alpha1.SchemeGroupVersion.WithResource("downstreamcopies")
)

func init() {
	install.Install(scheme)
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"}, &metav1.Status{})
}

// fakeWatcher is the storage: it records each Watch and answers with a
// FakeWatcher, or with err.
type fakeWatcher struct {
	mu      sync.Mutex
	calls   int
	ctx     context.Context
	opts    *metainternalversion.ListOptions
	watcher *watch.FakeWatcher
	err     error
}

func (f *fakeWatcher) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.ctx, f.opts = ctx, opts
	if f.err != nil {
		return nil, f.err
	}
	f.watcher = watch.NewFakeWithChanSize(8, false)
	return f.watcher, nil
}

func (f *fakeWatcher) called() (int, *watch.FakeWatcher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.watcher
}

func newServer(t *testing.T, w *fakeWatcher) *Server {
	t.Helper()
	kind := v1alpha1.SchemeGroupVersion.WithKind("DownstreamCopy")
	s, err := New(Config{
		Resource:   rows,
		IndexField: "spec.cluster",
		Watcher:    w,
		Serializer: codecs,
		ConvertFieldLabel: func(label, value string) (string, string, error) {
			return scheme.ConvertFieldLabel(kind, label, value)
		},
		MinRequestTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newRequest is a request as the handler chain hands it on: its request
// info resolved, with ctx.
func newRequest(t *testing.T, ctx context.Context, target string, header http.Header) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil).WithContext(ctx)
	for k, v := range header {
		req.Header[k] = v
	}
	resolver := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	info, err := resolver.NewRequestInfo(req)
	if err != nil {
		t.Fatal(err)
	}
	return req.WithContext(request.WithRequestInfo(req.Context(), info))
}

// recorder is a next handler that records whether it was reached.
type recorder struct{ reached bool }

func (r *recorder) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r.reached = true
	w.WriteHeader(http.StatusTeapot)
}

const agentWatch = "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?watch=true&fieldSelector=spec.cluster%3Dc1"

// Only a JSON watch of one namespace's rows whose valid options select
// one Cluster is served here; everything else reaches the generic
// handler, untouched and unwatched.
func TestTakesOnlyJSONWatchesOfOneCluster(t *testing.T) {
	jsonAccept := http.Header{"Accept": {"application/json, */*"}}
	for _, tc := range []struct {
		name   string
		target string
		header http.Header
		taken  bool
	}{
		{"an agent's watch", agentWatch, jsonAccept, true},
		{"no Accept header", agentWatch, nil, true},
		{"a watch-list", agentWatch + "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", jsonAccept, true},
		{"with another selector beside it", agentWatch + "%2Cspec.source.name%3Ds&labelSelector=a%3Db", jsonAccept, true},
		{"a Table, as kubectl get -w asks", agentWatch, http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}}, false},
		{"metadata only", agentWatch, http.Header{"Accept": {"application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"}}, false},
		{"YAML", agentWatch, http.Header{"Accept": {"application/yaml"}}, false},
		{"protobuf", agentWatch, http.Header{"Accept": {"application/vnd.kubernetes.protobuf"}}, false},
		{"pretty", agentWatch + "&pretty=true", jsonAccept, false},
		{"over a websocket", agentWatch, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, false},
		{"no field selector", "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?watch=true", jsonAccept, false},
		{"another field", "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?watch=true&fieldSelector=spec.helmOp%3Dh", jsonAccept, false},
		{"every Cluster but one", "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?watch=true&fieldSelector=spec.cluster!%3Dc1", jsonAccept, false},
		{"an empty Cluster", "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?watch=true&fieldSelector=spec.cluster%3D", jsonAccept, false},
		{"a field rows do not have", "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?watch=true&fieldSelector=spec.cluster%3Dc1%2Cspec.nothing%3Dx", jsonAccept, false},
		{"invalid options", agentWatch + "&sendInitialEvents=true", jsonAccept, false},
		{"a list", "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?fieldSelector=spec.cluster%3Dc1", jsonAccept, false},
		{"every namespace", "/apis/courier.dev/v1alpha1/downstreamcopies?watch=true&fieldSelector=spec.cluster%3Dc1", jsonAccept, false},
		{"one row by name", "/apis/courier.dev/v1alpha1/watch/namespaces/ws/downstreamcopies/r1?fieldSelector=spec.cluster%3Dc1", jsonAccept, false},
		{"another resource", "/apis/courier.dev/v1alpha1/namespaces/ws/fieldcopies?watch=true&fieldSelector=spec.cluster%3Dc1", jsonAccept, false},
		{"a subresource", "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies/r1/status?watch=true&fieldSelector=spec.cluster%3Dc1", jsonAccept, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storage := &fakeWatcher{}
			next := &recorder{}
			h := newServer(t, storage).Wrap(next)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := newRequest(t, ctx, tc.target, tc.header)
			rec := httptest.NewRecorder()
			served := make(chan struct{})
			go func() {
				defer close(served)
				h.ServeHTTP(rec, req)
			}()
			if tc.taken {
				// Served here: its watch is open until the client goes.
				if !waitFor(func() bool { n, w := storage.called(); return n == 1 && w != nil }) {
					t.Fatal("the storage was never asked for the watch")
				}
				cancel()
			} else {
				select {
				case <-served:
				case <-time.After(5 * time.Second):
					cancel()
					<-served
					t.Fatal("served here: the request was still being served after 5s")
				}
			}
			<-served
			if calls, _ := storage.called(); next.reached == tc.taken || (calls == 1) != tc.taken {
				t.Fatalf("taken %v: the generic handler reached %v, the storage watched %d times", tc.taken, next.reached, calls)
			}
		})
	}
}

func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// The watch is asked of the storage as the generic handler asks it: in
// the request's namespace, with its decoded options, and a deadline
// from timeoutSeconds or the server's minimum request timeout.
func TestWatchesTheStorageAsTheGenericHandlerDoes(t *testing.T) {
	watchList := utilfeature.DefaultFeatureGate.Enabled(features.WatchList)
	for _, tc := range []struct {
		name     string
		query    string
		min, max time.Duration
		// initialEvents is what a watch from resourceVersion "" is
		// defaulted to ask for: a watch-list, with the WatchList gate.
		initialEvents bool
	}{
		{"timeoutSeconds", "&resourceVersion=12&timeoutSeconds=7", 7 * time.Second, 7 * time.Second, false},
		{"the server's minimum, up to twice it", "&resourceVersion=12", time.Minute, 2 * time.Minute, false},
		{"from now", "", time.Minute, 2 * time.Minute, watchList},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storage := &fakeWatcher{}
			h := newServer(t, storage).Wrap(&recorder{})
			ctx, cancel := context.WithCancel(context.Background())
			req := newRequest(t, ctx, agentWatch+tc.query, nil)
			start := time.Now()
			served := make(chan struct{})
			go func() {
				defer close(served)
				h.ServeHTTP(httptest.NewRecorder(), req)
			}()
			if !waitFor(func() bool { n, _ := storage.called(); return n == 1 }) {
				t.Fatal("no watch")
			}
			cancel()
			<-served
			storage.mu.Lock()
			defer storage.mu.Unlock()
			if ns, _ := request.NamespaceFrom(storage.ctx); ns != "ws" {
				t.Errorf("namespace %q, want ws", ns)
			}
			o := storage.opts
			if v, ok := o.FieldSelector.RequiresExactMatch("spec.cluster"); !ok || v != "c1" || !o.Watch {
				t.Errorf("options %+v", o)
			}
			if initial := o.SendInitialEvents != nil && *o.SendInitialEvents && o.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan; initial != tc.initialEvents {
				t.Errorf("a watch-list %v, want %v (WatchList gate %v)", initial, tc.initialEvents, watchList)
			}
			deadline, ok := storage.ctx.Deadline()
			if !ok || deadline.Before(start.Add(tc.min)) || deadline.After(time.Now().Add(tc.max)) {
				t.Errorf("deadline %v after the request, want between %v and %v", deadline.Sub(start), tc.min, tc.max)
			}
		})
	}
}

// A watch the storage refuses is answered with the storage's error, as
// the generic handler answers it: a 410 Gone Status a client relists on.
func TestAnswersTheStoragesRefusal(t *testing.T) {
	storage := &fakeWatcher{err: newGone()}
	next := &recorder{}
	rec := httptest.NewRecorder()
	newServer(t, storage).Wrap(next).ServeHTTP(rec, newRequest(t, context.Background(), agentWatch+"&resourceVersion=1", nil))
	if next.reached || rec.Code != http.StatusGone || !strings.Contains(rec.Body.String(), `"reason":"Expired"`) {
		t.Fatalf("generic handler reached %v; answered %d %s", next.reached, rec.Code, rec.Body.String())
	}
}

// The watch ends, and the storage's watcher is stopped, on each of the
// generic handler's reasons: the client goes, the timeout passes, the
// server shuts down, the watcher closes. Each case is also a positive
// control for the others: the watch stays open until its own reason.
func TestWatchEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query string
		end   func(cancel context.CancelFunc, shutdown chan struct{}, w *watch.FakeWatcher)
	}{
		{"the client goes", "", func(cancel context.CancelFunc, _ chan struct{}, _ *watch.FakeWatcher) { cancel() }},
		{"its timeout passes", "&timeoutSeconds=1", func(context.CancelFunc, chan struct{}, *watch.FakeWatcher) {}},
		{"the server shuts down", "", func(_ context.CancelFunc, shutdown chan struct{}, _ *watch.FakeWatcher) { close(shutdown) }},
		{"the watcher closes", "", func(_ context.CancelFunc, _ chan struct{}, w *watch.FakeWatcher) { w.Stop() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storage := &fakeWatcher{}
			h := newServer(t, storage).Wrap(&recorder{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			shutdown := make(chan struct{})
			ctx = request.WithServerShutdownSignal(ctx, shutdownSignal(shutdown))
			served := make(chan struct{})
			go func() {
				defer close(served)
				h.ServeHTTP(httptest.NewRecorder(), newRequest(t, ctx, agentWatch+tc.query, nil))
			}()
			var w *watch.FakeWatcher
			if !waitFor(func() bool { _, w = storage.called(); return w != nil }) {
				t.Fatal("no watch")
			}
			select {
			case <-served:
				t.Fatal("the watch ended before its reason")
			case <-time.After(100 * time.Millisecond):
			}
			tc.end(cancel, shutdown, w)
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not end")
			}
			if !w.IsStopped() {
				t.Fatal("the storage's watcher was not stopped")
			}
		})
	}
}

type shutdownSignal chan struct{}

func (s shutdownSignal) ShuttingDown() <-chan struct{} { return s }

// With the generic server's APIServingWithRoutine, the watch is set up
// in the request's goroutine and served by the task it leaves for the
// goroutine the request arrived on.
func TestServesFromTheRoutinesTask(t *testing.T) {
	storage := &fakeWatcher{}
	h := newServer(t, storage).Wrap(&recorder{})
	task := &routine.Task{}
	ctx, cancel := context.WithCancel(routine.WithTask(context.Background(), task))
	rec := httptest.NewRecorder()
	set := make(chan struct{})
	go func() {
		defer close(set)
		h.ServeHTTP(rec, newRequest(t, ctx, agentWatch, nil)) // returns at once
	}()
	select {
	case <-set:
	case <-time.After(5 * time.Second):
		cancel()
		<-set
		t.Fatal("served in the request's goroutine: no task was left")
	}
	calls, w := storage.called()
	if calls != 1 || task.Func == nil || rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Fatalf("set up %d watches, task %v; before serving, answered %d with %q", calls, task.Func != nil, rec.Code, rec.Body.String())
	}
	w.Add(&courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "ws", ResourceVersion: "3"}})
	w.Stop()
	task.Func()
	cancel()
	if got := rec.Header().Get("Content-Type"); got != "application/json" || !strings.Contains(rec.Body.String(), `{"type":"ADDED","object":{"kind":"DownstreamCopy","apiVersion":"courier.dev/v1alpha1","metadata":{"name":"r1"`) {
		t.Fatalf("served %q: %s", got, rec.Body.String())
	}
}

func newGone() error {
	return apierrors.NewResourceExpired("too old resource version: 1 (5)")
}
