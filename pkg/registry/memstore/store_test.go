package memstore

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

type dcp = courier.DownstreamCopy

// baseRV is the initial resource version of the stores under test: the
// first change gets baseRV+1.
const baseRV = 100

func rv(n int) string { return strconv.Itoa(baseRV + n) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func newTestStore(opts ...Option) (*Store[*dcp], *fakeClock) {
	clock := &fakeClock{now: t0}
	opts = append([]Option{WithInitialResourceVersion(baseRV), WithClock(clock.Now)}, opts...)
	return New[*dcp](opts...), clock
}

func newDCP() *dcp { return &dcp{} }

// obj builds a row; mods adjust it.
func obj(ns, name string, phase courier.CopyPhase, mods ...func(*dcp)) *dcp {
	o := &dcp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       courier.DownstreamCopySpec{HelmOp: "app", Cluster: "c1", Source: courier.CopySource{Kind: "Secret", Name: name}},
		Status:     courier.DownstreamCopyStatus{Phase: phase},
	}
	for _, m := range mods {
		m(o)
	}
	return o
}

func withMessage(m string) func(*dcp) { return func(o *dcp) { o.Status.Message = m } }

// ev is what a test compares of an event.
type ev struct {
	Type      watch.EventType
	Namespace string
	Name      string
	RV        string
	Phase     courier.CopyPhase
	// InitialEventsEnd is true when the object carries the
	// k8s.io/initial-events-end: "true" annotation.
	InitialEventsEnd bool
}

func (e ev) String() string {
	return fmt.Sprintf("%s %s/%s rv=%s phase=%s end=%v", e.Type, e.Namespace, e.Name, e.RV, e.Phase, e.InitialEventsEnd)
}

func summarize(t *testing.T, e watch.Event) ev {
	t.Helper()
	o, ok := e.Object.(*dcp)
	if !ok {
		t.Fatalf("event %s holds %T, want *courier.DownstreamCopy", e.Type, e.Object)
	}
	return ev{
		Type: e.Type, Namespace: o.Namespace, Name: o.Name, RV: o.ResourceVersion, Phase: o.Status.Phase,
		InitialEventsEnd: o.Annotations[metav1.InitialEventsAnnotationKey] == "true",
	}
}

// pending returns the events waiting in w without blocking. Replace hands
// events to the watchers before it returns, so after Replace every event it
// caused is already waiting.
func pending(t *testing.T, w watch.Interface) []ev {
	t.Helper()
	var got []ev
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, summarize(t, e))
		default:
			return got
		}
	}
}

func expectEvents(t *testing.T, w watch.Interface, want []ev) {
	t.Helper()
	got := pending(t, w)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
}

// expectClosed drains w and fails unless its channel is closed within a
// few seconds.
func expectClosed(t *testing.T, w watch.Interface) []ev {
	t.Helper()
	var got []ev
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, summarize(t, e))
		case <-timeout:
			t.Fatalf("result channel not closed; received %v", got)
		}
	}
}

func mustWatch(t *testing.T, s *Store[*dcp], ns string, match func(*dcp) bool, opts *metainternalversion.ListOptions) watch.Interface {
	t.Helper()
	w, err := s.Watch(context.Background(), ns, match, opts, newDCP)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

func TestReplace(t *testing.T) {
	tcs := []struct {
		name    string
		initial []*dcp
		next    []*dcp
		want    []ev
	}{
		{
			name: "add to empty",
			next: []*dcp{obj("ns", "b", "Pending"), obj("ns", "a", "Synced")},
			want: []ev{{Type: watch.Added, Namespace: "ns", Name: "a", RV: rv(1), Phase: "Synced"}, {Type: watch.Added, Namespace: "ns", Name: "b", RV: rv(2), Phase: "Pending"}},
		},
		{
			name:    "identical set is a no-op",
			initial: []*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Pending")},
			next:    []*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Pending")},
		},
		{
			name:    "resourceVersion, creationTimestamp and uid are ignored",
			initial: []*dcp{obj("ns", "a", "Synced")},
			next: []*dcp{obj("ns", "a", "Synced", func(o *dcp) {
				o.ResourceVersion = "999"
				o.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
				o.UID = "other"
			})},
		},
		{
			name:    "nil and empty maps are equal",
			initial: []*dcp{obj("ns", "a", "Synced", func(o *dcp) { o.Labels = map[string]string{} })},
			next:    []*dcp{obj("ns", "a", "Synced")},
		},
		{
			name:    "modify",
			initial: []*dcp{obj("ns", "a", "Pending"), obj("ns", "b", "Pending")},
			next:    []*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Pending")},
			want:    []ev{{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(3), Phase: "Synced"}},
		},
		{
			name:    "a label is a change",
			initial: []*dcp{obj("ns", "a", "Synced")},
			next:    []*dcp{obj("ns", "a", "Synced", func(o *dcp) { o.Labels = map[string]string{"k": "v"} })},
			want:    []ev{{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(2), Phase: "Synced"}},
		},
		{
			name:    "delete sends the last state",
			initial: []*dcp{obj("ns", "a", "Kept"), obj("ns", "b", "Pending")},
			next:    []*dcp{obj("ns", "b", "Pending")},
			want:    []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(3), Phase: "Kept"}},
		},
		{
			name:    "delete everything",
			initial: []*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Synced")},
			want:    []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(3), Phase: "Synced"}, {Type: watch.Deleted, Namespace: "ns", Name: "b", RV: rv(4), Phase: "Synced"}},
		},
		{
			name:    "mixed changes come in namespace/name order",
			initial: []*dcp{obj("a", "x", "Pending"), obj("a", "y", "Pending"), obj("b", "x", "Pending")},
			next:    []*dcp{obj("a-b", "a", "Synced"), obj("a", "x", "Synced"), obj("a", "y", "Pending"), obj("a", "z", "Pending")},
			want: []ev{
				{Type: watch.Modified, Namespace: "a", Name: "x", RV: rv(4), Phase: "Synced"},
				{Type: watch.Added, Namespace: "a", Name: "z", RV: rv(5), Phase: "Pending"},
				{Type: watch.Added, Namespace: "a-b", Name: "a", RV: rv(6), Phase: "Synced"},
				{Type: watch.Deleted, Namespace: "b", Name: "x", RV: rv(7), Phase: "Pending"},
			},
		},
		{
			name:    "duplicates: the last one wins",
			initial: []*dcp{obj("ns", "a", "Pending")},
			next:    []*dcp{obj("ns", "a", "Synced"), obj("ns", "a", "Conflict")},
			want:    []ev{{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(2), Phase: "Conflict"}},
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore()
			s.Replace(tc.initial)
			w := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: rv(len(tc.initial))})

			s.Replace(tc.next)

			expectEvents(t, w, tc.want)
			wantRV := rv(len(tc.initial) + len(tc.want))
			if _, got := s.List("", nil); got != wantRV {
				t.Errorf("list resourceVersion = %s, want %s", got, wantRV)
			}
			for _, o := range tc.next {
				if o.ResourceVersion != "" && o.ResourceVersion != "999" {
					t.Errorf("Replace modified its input: %s/%s has resourceVersion %q", o.Namespace, o.Name, o.ResourceVersion)
				}
			}
		})
	}
}

func TestReplaceStampsMetadata(t *testing.T) {
	s, clock := newTestStore()
	created := metav1.NewTime(t0)

	in := obj("ns", "a", "Pending")
	s.Replace([]*dcp{in})
	a1, ok := s.Get("ns", "a")
	if !ok {
		t.Fatal("Get ns/a after Replace: not found")
	}
	if a1.ResourceVersion != rv(1) || !a1.CreationTimestamp.Equal(&created) || a1.UID == "" {
		t.Fatalf("new object: rv=%q created=%v uid=%q; want rv=%s created=%v and a uid", a1.ResourceVersion, a1.CreationTimestamp, a1.UID, rv(1), created)
	}

	t.Run("the store keeps its own copy", func(t *testing.T) {
		in.Status.Phase = "Mutated"
		a1.Status.Message = "mutated"
		got, _ := s.Get("ns", "a")
		if got.Status.Phase != "Pending" || got.Status.Message != "" {
			t.Errorf("stored object changed through a caller's pointer: %+v", got.Status)
		}
	})

	t.Run("a change keeps creationTimestamp and uid", func(t *testing.T) {
		clock.Set(t0.Add(time.Hour))
		s.Replace([]*dcp{obj("ns", "a", "Synced", func(o *dcp) { o.UID = "ignored"; o.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute)) })})
		a2, _ := s.Get("ns", "a")
		if a2.ResourceVersion != rv(2) || !a2.CreationTimestamp.Equal(&created) || a2.UID != a1.UID || a2.Status.Phase != "Synced" {
			t.Errorf("changed object: rv=%q created=%v uid=%q phase=%s; want rv=%s created=%v uid=%q phase=Synced", a2.ResourceVersion, a2.CreationTimestamp, a2.UID, a2.Status.Phase, rv(2), created, a1.UID)
		}
	})

	t.Run("a new object keeps its own creationTimestamp and uid", func(t *testing.T) {
		own := metav1.NewTime(t0.Add(-time.Hour))
		s.Replace([]*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Synced", func(o *dcp) { o.UID = "uid-b"; o.CreationTimestamp = own })})
		b, _ := s.Get("ns", "b")
		if b.UID != "uid-b" || !b.CreationTimestamp.Equal(&own) || b.ResourceVersion != rv(3) {
			t.Errorf("new object: rv=%q created=%v uid=%q; want rv=%s created=%v uid=uid-b", b.ResourceVersion, b.CreationTimestamp, b.UID, rv(3), own)
		}
	})

	t.Run("an object deleted and added again is new", func(t *testing.T) {
		s.Replace([]*dcp{obj("ns", "b", "Synced")})
		clock.Set(t0.Add(2 * time.Hour))
		s.Replace([]*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Synced")})
		a3, _ := s.Get("ns", "a")
		later := metav1.NewTime(t0.Add(2 * time.Hour))
		if a3.UID == a1.UID || !a3.CreationTimestamp.Equal(&later) || a3.ResourceVersion != rv(5) {
			t.Errorf("re-added object: rv=%q created=%v uid=%q; want rv=%s created=%v and a new uid", a3.ResourceVersion, a3.CreationTimestamp, a3.UID, rv(5), later)
		}
	})

	t.Run("resource versions only grow", func(t *testing.T) {
		w := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false)})
		last, _ := strconv.ParseUint(rv(5), 10, 64)
		for i := 0; i < 20; i++ {
			s.Replace([]*dcp{obj("ns", "a", courier.CopyPhase(fmt.Sprint("P", i%3))), obj("ns", "c", "Synced", withMessage(fmt.Sprint(i%2)))})
			for _, e := range pending(t, w) {
				n, err := strconv.ParseUint(e.RV, 10, 64)
				if err != nil || n != last+1 {
					t.Fatalf("event %v: resourceVersion after %d is %q, want %d", e, last, e.RV, last+1)
				}
				last = n
			}
			if _, got := s.List("", nil); got != strconv.FormatUint(last, 10) {
				t.Fatalf("list resourceVersion %s, want the last event's %d", got, last)
			}
		}
	})
}

func TestList(t *testing.T) {
	s, _ := newTestStore()
	s.Replace([]*dcp{obj("ns2", "a", "Synced"), obj("ns1", "b", "Pending"), obj("ns1", "a", "Synced"), obj("ns1-x", "a", "Synced")})
	synced := func(o *dcp) bool { return o.Status.Phase == "Synced" }
	tcs := []struct {
		name      string
		namespace string
		match     func(*dcp) bool
		want      []string
	}{
		{name: "all namespaces, sorted by namespace then name", want: []string{"ns1/a", "ns1/b", "ns1-x/a", "ns2/a"}},
		{name: "one namespace", namespace: "ns1", want: []string{"ns1/a", "ns1/b"}},
		{name: "match", match: synced, want: []string{"ns1/a", "ns1-x/a", "ns2/a"}},
		{name: "namespace and match", namespace: "ns1", match: synced, want: []string{"ns1/a"}},
		{name: "unknown namespace", namespace: "nope"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			items, gotRV := s.List(tc.namespace, tc.match)
			var got []string
			for _, it := range items {
				got = append(got, it.Namespace+"/"+it.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("List = %v, want %v", got, tc.want)
			}
			if gotRV != rv(4) {
				t.Errorf("resourceVersion = %s, want %s", gotRV, rv(4))
			}
		})
	}
}

func TestListExact(t *testing.T) {
	s, _ := newTestStore(WithHistorySize(3))
	type snapshot struct {
		rv    string
		items []*dcp
	}
	var snaps []snapshot
	take := func() {
		items, v := s.List("", nil)
		snaps = append(snaps, snapshot{rv: v, items: items})
	}
	take()                                                                     // 100: empty
	s.Replace([]*dcp{obj("ns", "a", "Pending")})                               // 101
	take()                                                                     //
	s.Replace([]*dcp{obj("ns", "a", "Pending"), obj("ns", "b", "Pending")})    // 102
	take()                                                                     //
	s.Replace([]*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Pending")})     // 103
	take()                                                                     //
	s.Replace([]*dcp{obj("ns", "b", "Pending"), obj("other", "c", "Pending")}) // 104, 105
	take()

	// The history holds 103..105, so 102 is the oldest state it can rebuild.
	for _, sn := range snaps {
		t.Run("at "+sn.rv, func(t *testing.T) {
			items, gotRV, err := s.ListExact("", sn.rv, nil)
			if n, _ := strconv.Atoi(sn.rv); n < baseRV+2 {
				if !apierrors.IsResourceExpired(err) {
					t.Fatalf("ListExact(%s) error = %v, want 410 Expired", sn.rv, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ListExact(%s): %v", sn.rv, err)
			}
			if gotRV != sn.rv {
				t.Errorf("resourceVersion %s, want %s", gotRV, sn.rv)
			}
			if !reflect.DeepEqual(items, sn.items) {
				t.Errorf("ListExact(%s) =\n%+v\nwant what List returned then:\n%+v", sn.rv, items, sn.items)
			}
		})
	}
	t.Run("namespace and match apply", func(t *testing.T) {
		items, _, err := s.ListExact("ns", rv(3), func(o *dcp) bool { return o.Status.Phase == "Synced" })
		if err != nil || len(items) != 1 || items[0].Name != "a" {
			t.Errorf("ListExact(ns, %s, Synced) = %v, %v; want ns/a", rv(3), items, err)
		}
	})
	t.Run("newer than current", func(t *testing.T) {
		if _, _, err := s.ListExact("", rv(6), nil); !apierrors.IsResourceExpired(err) {
			t.Errorf("error = %v, want 410 Expired", err)
		}
	})
	t.Run("not a number", func(t *testing.T) {
		if _, _, err := s.ListExact("", "x", nil); !apierrors.IsBadRequest(err) {
			t.Errorf("error = %v, want 400 BadRequest", err)
		}
	})
}

func TestWatchStart(t *testing.T) {
	added := func(name, v string, p courier.CopyPhase) ev {
		return ev{Type: watch.Added, Namespace: "ns", Name: name, RV: v, Phase: p}
	}
	bookmark := ev{Type: watch.Bookmark, RV: rv(4), InitialEventsEnd: true}
	tcs := []struct {
		name    string
		opts    *metainternalversion.ListOptions
		want    []ev
		wantErr func(error) bool
	}{
		{name: "nil options: current state", opts: nil, want: []ev{added("b", rv(2), "Pending")}},
		{name: "resourceVersion unset: current state", opts: &metainternalversion.ListOptions{}, want: []ev{added("b", rv(2), "Pending")}},
		{name: "resourceVersion 0: current state", opts: &metainternalversion.ListOptions{ResourceVersion: "0"}, want: []ev{added("b", rv(2), "Pending")}},
		{name: "sendInitialEvents=false, resourceVersion unset: from now", opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(false)}},
		{name: "sendInitialEvents=false, resourceVersion 0: from now", opts: &metainternalversion.ListOptions{ResourceVersion: "0", SendInitialEvents: ptr.To(false)}},
		{name: "current resourceVersion: nothing to replay", opts: &metainternalversion.ListOptions{ResourceVersion: rv(4)}},
		{
			name: "oldest resourceVersion the history covers",
			opts: &metainternalversion.ListOptions{ResourceVersion: rv(1)},
			want: []ev{
				added("b", rv(2), "Pending"),
				{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(3), Phase: "Synced"},
				{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(4), Phase: "Synced"},
			},
		},
		{
			name: "resourceVersion in the history",
			opts: &metainternalversion.ListOptions{ResourceVersion: rv(3), SendInitialEvents: ptr.To(false)},
			want: []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(4), Phase: "Synced"}},
		},
		{name: "resourceVersion older than the history", opts: &metainternalversion.ListOptions{ResourceVersion: rv(0)}, wantErr: apierrors.IsResourceExpired},
		{name: "resourceVersion from another process", opts: &metainternalversion.ListOptions{ResourceVersion: "7"}, wantErr: apierrors.IsResourceExpired},
		{name: "resourceVersion newer than current", opts: &metainternalversion.ListOptions{ResourceVersion: rv(5)}, wantErr: apierrors.IsResourceExpired},
		{name: "resourceVersion not a number", opts: &metainternalversion.ListOptions{ResourceVersion: "abc"}, wantErr: apierrors.IsBadRequest},
		{
			name: "watch-list: initial events and the initial-events-end bookmark",
			opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			want: []ev{added("b", rv(2), "Pending"), bookmark},
		},
		{
			name: "watch-list from an old resourceVersion still sends the current state",
			opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersion: "7"},
			want: []ev{added("b", rv(2), "Pending"), bookmark},
		},
		{
			name: "watch-list without bookmarks",
			opts: &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true)},
			want: []ev{added("b", rv(2), "Pending")},
		},
		{
			name:    "watch-list from a resourceVersion newer than current",
			opts:    &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersion: rv(9)},
			wantErr: apierrors.IsResourceExpired,
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			// 101 add a, 102 add b, 103 modify a, 104 delete a; the
			// history holds 102..104.
			s, _ := newTestStore(WithHistorySize(3))
			s.Replace([]*dcp{obj("ns", "a", "Pending")})
			s.Replace([]*dcp{obj("ns", "a", "Pending"), obj("ns", "b", "Pending")})
			s.Replace([]*dcp{obj("ns", "a", "Synced"), obj("ns", "b", "Pending")})
			s.Replace([]*dcp{obj("ns", "b", "Pending")})

			w, err := s.Watch(context.Background(), "", nil, tc.opts, newDCP)
			if tc.wantErr != nil {
				if err == nil || !tc.wantErr(err) {
					t.Fatalf("Watch error = %v, want a different error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Stop()
			expectEvents(t, w, tc.want)

			// The watch goes on with live changes.
			s.Replace([]*dcp{obj("ns", "b", "Pending"), obj("ns", "c", "Synced")})
			expectEvents(t, w, []ev{added("c", rv(5), "Synced")})
		})
	}
}

func TestWatchListBookmarkObject(t *testing.T) {
	s, _ := newTestStore()
	s.Replace([]*dcp{obj("ns", "a", "Synced")})
	w := mustWatch(t, s, "ns", nil, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true})
	<-w.ResultChan() // Added ns/a
	e := <-w.ResultChan()
	bm, ok := e.Object.(*dcp)
	if e.Type != watch.Bookmark || !ok {
		t.Fatalf("second event is %s %T, want Bookmark *DownstreamCopy", e.Type, e.Object)
	}
	want := &dcp{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv(1), Annotations: map[string]string{"k8s.io/initial-events-end": "true"}}}
	if !reflect.DeepEqual(bm, want) {
		t.Errorf("bookmark object = %+v, want %+v", bm, want)
	}
	if _, err := s.Watch(context.Background(), "", nil, &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}, nil); err == nil {
		t.Error("watch-list without a constructor for the bookmark: no error")
	}
}

func TestWatchPredicateTransitions(t *testing.T) {
	synced := func(o *dcp) bool { return o.Status.Phase == "Synced" }
	steps := []struct {
		name string
		set  []*dcp
		want []ev
	}{
		{name: "not matching", set: []*dcp{obj("ns", "a", "Pending")}},
		{name: "starts to match", set: []*dcp{obj("ns", "a", "Synced")}, want: []ev{{Type: watch.Added, Namespace: "ns", Name: "a", RV: rv(2), Phase: "Synced"}}},
		{name: "still matches", set: []*dcp{obj("ns", "a", "Synced", withMessage("m"))}, want: []ev{{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(3), Phase: "Synced"}}},
		{name: "stops matching: Deleted with the last matching state", set: []*dcp{obj("ns", "a", "Conflict")}, want: []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(4), Phase: "Synced"}}},
		{name: "changes while not matching", set: []*dcp{obj("ns", "a", "Conflict", withMessage("x"))}},
		{name: "matches again", set: []*dcp{obj("ns", "a", "Synced")}, want: []ev{{Type: watch.Added, Namespace: "ns", Name: "a", RV: rv(6), Phase: "Synced"}}},
		{name: "other namespace", set: []*dcp{obj("ns", "a", "Synced"), obj("other", "b", "Synced")}},
		{name: "deleted while matching", set: []*dcp{obj("other", "b", "Synced")}, want: []ev{{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(8), Phase: "Synced"}}},
		{name: "added not matching, deleted", set: []*dcp{obj("ns", "c", "Pending")}},
		{name: "deleted not matching", set: nil},
	}
	s, _ := newTestStore()
	w := mustWatch(t, s, "ns", synced, &metainternalversion.ListOptions{ResourceVersion: rv(0)})
	var all []ev
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			s.Replace(st.set)
			expectEvents(t, w, st.want)
		})
		all = append(all, st.want...)
	}
	t.Run("replay from the history gives the same events", func(t *testing.T) {
		replay := mustWatch(t, s, "ns", synced, &metainternalversion.ListOptions{ResourceVersion: rv(0)})
		expectEvents(t, replay, all)
	})
}

func TestWatchEventsAreDeepCopies(t *testing.T) {
	s, _ := newTestStore()
	w1 := mustWatch(t, s, "", nil, nil)
	w2 := mustWatch(t, s, "", nil, nil)
	s.Replace([]*dcp{obj("ns", "a", "Synced")})
	e1, e2 := <-w1.ResultChan(), <-w2.ResultChan()
	if e1.Object == e2.Object {
		t.Fatal("two watchers got the same object")
	}
	e1.Object.(*dcp).Status.Phase = "Mutated"
	if got, _ := s.Get("ns", "a"); got.Status.Phase != "Synced" {
		t.Errorf("stored object changed through an event: phase %s", got.Status.Phase)
	}
	if e2.Object.(*dcp).Status.Phase != "Synced" {
		t.Error("one watcher's event changed another's")
	}
}

func TestSlowWatcherIsClosed(t *testing.T) {
	s, _ := newTestStore(WithWatchBufferSize(2))
	slow := mustWatch(t, s, "", nil, nil)
	fast := mustWatch(t, s, "", nil, nil)

	var set []*dcp
	for i := 1; i <= 10; i++ {
		set = append(set, obj("ns", fmt.Sprintf("o%02d", i), "Synced"))
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Replace(set)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Replace %d blocked on a watcher that does not read", i)
		}
		select {
		case e := <-fast.ResultChan():
			if got := summarize(t, e); got.Type != watch.Added || got.RV != rv(i) {
				t.Fatalf("fast watcher got %v, want Added rv %s", got, rv(i))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("fast watcher got nothing for change %d", i)
		}
	}

	got := expectClosed(t, slow)
	want := []ev{
		{Type: watch.Added, Namespace: "ns", Name: "o01", RV: rv(1), Phase: "Synced"},
		{Type: watch.Added, Namespace: "ns", Name: "o02", RV: rv(2), Phase: "Synced"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slow watcher got %v before it was closed, want %v", got, want)
	}
	s.mu.RLock()
	n := len(s.watchers)
	s.mu.RUnlock()
	if n != 1 {
		t.Errorf("%d watchers registered, want only the fast one", n)
	}

	// Its client watches again from the last version it saw and misses nothing.
	again := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: rv(2)})
	if got := pending(t, again); len(got) != 8 || got[0].Name != "o03" || got[7].Name != "o10" {
		t.Errorf("resumed watch got %v, want o03..o10", got)
	}
}

func TestWatchStop(t *testing.T) {
	t.Run("Stop closes the result channel", func(t *testing.T) {
		s, _ := newTestStore()
		s.Replace([]*dcp{obj("ns", "a", "Synced")})
		w, err := s.Watch(context.Background(), "", nil, nil, newDCP)
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		w.Stop() // harmless
		if got := expectClosed(t, w); len(got) > 1 {
			t.Errorf("got %v after Stop, want at most the one queued event", got)
		}
		s.Replace(nil) // no send on a closed channel
	})
	t.Run("cancelling the context closes the result channel", func(t *testing.T) {
		s, _ := newTestStore()
		ctx, cancel := context.WithCancel(context.Background())
		w, err := s.Watch(ctx, "", nil, nil, newDCP)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		expectClosed(t, w)
		s.Replace([]*dcp{obj("ns", "a", "Synced")})
		w.Stop()
	})
	t.Run("no goroutine or watcher outlives its watch", func(t *testing.T) {
		s, _ := newTestStore()
		before := runtime.NumGoroutine()
		var cancels []context.CancelFunc
		var ws []watch.Interface
		for i := 0; i < 50; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			w, err := s.Watch(ctx, "", nil, nil, newDCP)
			if err != nil {
				t.Fatal(err)
			}
			cancels = append(cancels, cancel)
			ws = append(ws, w)
		}
		for i, w := range ws {
			if i%2 == 0 {
				cancels[i]()
			} else {
				w.Stop()
			}
		}
		for _, w := range ws {
			expectClosed(t, w)
		}
		for _, c := range cancels {
			c()
		}
		s.mu.RLock()
		n := len(s.watchers)
		s.mu.RUnlock()
		if n != 0 {
			t.Errorf("%d watchers still registered", n)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if after := runtime.NumGoroutine(); after > before {
			t.Errorf("%d goroutines before the watches, %d after they ended", before, after)
		}
	})
}

// TestConcurrentWatchersSeeConsistentState runs writers, readers and
// watchers at once (meant for -race) and checks that a watcher that applies
// its events ends with exactly what List returns.
func TestConcurrentWatchersSeeConsistentState(t *testing.T) {
	s, _ := newTestStore(WithWatchBufferSize(100000))
	const rounds = 200
	set := func(i int) []*dcp {
		var out []*dcp
		for j := 0; j < 10; j++ {
			if (i+j)%3 != 0 {
				out = append(out, obj(fmt.Sprint("ns", j%2), fmt.Sprint("o", j), courier.CopyPhase(fmt.Sprint("P", (i*j)%4))))
			}
		}
		return out
	}
	synced := func(o *dcp) bool { return o.Status.Phase == "P1" || o.Status.Phase == "P2" }

	type result struct {
		state map[string]string
		err   error
	}
	var wg sync.WaitGroup
	results := make(chan result, 8)
	stop := make(chan struct{})
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			ns, match := "", func(*dcp) bool { return true }
			if k%2 == 1 {
				ns, match = "ns1", synced
			}
			opts := &metainternalversion.ListOptions{}
			if k >= 4 {
				opts = &metainternalversion.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}
			}
			w, err := s.Watch(context.Background(), ns, match, opts, newDCP)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer w.Stop()
			state := map[string]string{}
			for {
				select {
				case e := <-w.ResultChan():
					if e.Type == watch.Bookmark {
						continue
					}
					o := e.Object.(*dcp)
					switch e.Type {
					case watch.Added, watch.Modified:
						state[o.Namespace+"/"+o.Name] = o.ResourceVersion + " " + string(o.Status.Phase)
					case watch.Deleted:
						delete(state, o.Namespace+"/"+o.Name)
					}
				case <-stop:
					// Everything written is queued by now; take the rest.
					for {
						select {
						case e := <-w.ResultChan():
							o := e.Object.(*dcp)
							switch e.Type {
							case watch.Added, watch.Modified:
								state[o.Namespace+"/"+o.Name] = o.ResourceVersion + " " + string(o.Status.Phase)
							case watch.Deleted:
								delete(state, o.Namespace+"/"+o.Name)
							}
						default:
							items, _ := s.List(ns, match)
							want := map[string]string{}
							for _, it := range items {
								want[it.Namespace+"/"+it.Name] = it.ResourceVersion + " " + string(it.Status.Phase)
							}
							if !reflect.DeepEqual(state, want) {
								results <- result{err: fmt.Errorf("watcher %d ended with %v, list says %v", k, state, want)}
								return
							}
							results <- result{state: state}
							return
						}
					}
				}
			}
		}(k)
	}
	var writers sync.WaitGroup
	for g := 0; g < 3; g++ {
		writers.Add(1)
		go func(g int) {
			defer writers.Done()
			for i := 0; i < rounds; i++ {
				s.Replace(set(i*3 + g))
				s.List("ns0", nil)
				s.Get("ns1", "o1")
			}
		}(g)
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Error(r.err)
		}
	}
}
