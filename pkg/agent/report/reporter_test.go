package report

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

const ns = "fleet-default"

type fakeRows map[string]*v1alpha1.DownstreamCopy

func (f fakeRows) Row(key string) (*v1alpha1.DownstreamCopy, bool) { r, ok := f[key]; return r, ok }
func (f fakeRows) Keys() []string {
	var keys []string
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type fakeStatuses map[string]copycontract.Status

func (f fakeStatuses) Status(key string) (copycontract.Status, bool) { s, ok := f[key]; return s, ok }

// upstream records the status PUTs it is sent and answers with code.
type upstream struct {
	mu      sync.Mutex
	code    int
	reports []*v1alpha1.DownstreamCopy
	paths   []string
	got     chan struct{}
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer func() { u.mu.Unlock(); u.got <- struct{}{} }()
	u.paths = append(u.paths, r.Method+" "+r.URL.Path)
	body := &v1alpha1.DownstreamCopy{}
	_ = json.NewDecoder(r.Body).Decode(body)
	u.reports = append(u.reports, body)
	w.Header().Set("Content-Type", "application/json")
	if u.code != http.StatusOK {
		w.WriteHeader(u.code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: int32(u.code), Reason: metav1.StatusReasonServiceUnavailable})
		return
	}
	_ = json.NewEncoder(w).Encode(body)
}

func (u *upstream) take() ([]string, []*v1alpha1.DownstreamCopy) {
	u.mu.Lock()
	defer u.mu.Unlock()
	p, r := u.paths, u.reports
	u.paths, u.reports = nil, nil
	return p, r
}

func (u *upstream) setCode(c int) { u.mu.Lock(); u.code = c; u.mu.Unlock() }

func row(name string) *v1alpha1.DownstreamCopy {
	return &v1alpha1.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "99"},
		Spec: v1alpha1.DownstreamCopySpec{HelmOp: "app", Cluster: "edge2", Source: v1alpha1.CopySource{Kind: "Secret", Name: name}}}
}

// afterClock is a fake clock that tells of every After (a backoff).
type afterClock struct {
	*clocktesting.FakeClock
	after chan time.Duration
}

func (c afterClock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.after <- d
	return ch
}

func setup(t *testing.T) (*Pending, *upstream, afterClock, fakeStatuses) {
	up := &upstream{code: http.StatusOK, got: make(chan struct{}, 100)}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	rows := fakeRows{ns + "/a": row("a"), ns + "/b": row("b"), ns + "/c": row("c")}
	statuses := fakeStatuses{
		ns + "/a": {Phase: courier.CopyPhaseSynced, Message: "the copy matches its source", SyncedResourceVersion: "7"},
		ns + "/b": {Phase: courier.CopyPhaseForbidden, Message: "forbidden"},
		// c has no status yet: nothing to report
	}
	pending := NewPending()
	r := New(c.CourierV1alpha1(), 30*time.Second, rows, statuses, pending)
	clk := afterClock{clocktesting.NewFakeClock(time.Now()), make(chan time.Duration, 10)}
	r.clock = clk
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return pending, up, clk, statuses
}

// wait waits for n requests.
func (u *upstream) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-u.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("fewer than %d requests", n)
		}
	}
}

// A changed row is sent as a status PUT with its phase, message, synced
// resourceVersion and the report interval; the heartbeat sends every row
// with a status.
func TestReportChangedAndHeartbeat(t *testing.T) {
	pending, up, clk, _ := setup(t)
	pending.Changed([]copycontract.StatusChange{{Rows: []string{ns + "/a"}}})
	up.wait(t, 1)
	paths, reports := up.take()
	if want := []string{"PUT /apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopies/a/status"}; !slices.Equal(paths, want) {
		t.Fatalf("requests %q, want %q", paths, want)
	}
	got := reports[0]
	if got.Status.Phase != v1alpha1.CopyPhaseSynced || got.Status.SyncedResourceVersion != "7" || got.Status.Message == "" ||
		got.Annotations[AnnotationReportInterval] != "30s" || got.ResourceVersion != "" || got.Spec.Cluster != "edge2" {
		t.Errorf("report %+v", got)
	}

	clk.Step(30 * time.Second)
	up.wait(t, 2)
	paths, _ = up.take()
	sort.Strings(paths)
	if len(paths) != 2 || paths[0] != "PUT /apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopies/a/status" ||
		paths[1] != "PUT /apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopies/b/status" {
		t.Errorf("heartbeat sent %q, want a and b (c has no status)", paths)
	}
}

// A failed report is retried after a backoff, not at once; a change in
// the meantime waits for it too; copying (Changed) never blocks.
func TestReportBackoff(t *testing.T) {
	pending, up, clk, _ := setup(t)
	up.setCode(http.StatusServiceUnavailable)
	pending.Changed([]copycontract.StatusChange{{Rows: []string{ns + "/a", ns + "/b"}}})
	up.wait(t, 1) // stops at the first failure: Courier is away
	up.take()
	done := make(chan struct{})
	go func() {
		for range 1000 {
			pending.Changed([]copycontract.StatusChange{{Rows: []string{ns + "/a"}}})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed blocked while reports fail")
	}
	// Nothing is sent before the backoff is over.
	if d := <-clk.after; d != time.Second {
		t.Errorf("first backoff %s, want 1s", d)
	}
	select {
	case <-up.got:
		t.Fatal("a report was sent during the backoff")
	default:
	}
	up.setCode(http.StatusOK)
	clk.Step(time.Second)
	up.wait(t, 2)
	paths, _ := up.take()
	sort.Strings(paths)
	if len(paths) != 2 {
		t.Errorf("after the backoff sent %q, want a and b", paths)
	}
}
