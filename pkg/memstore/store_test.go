package memstore

import (
	"context"
	"fmt"
	"reflect"
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

// ListExact, for these tests, is List as of resourceVersion: the state
// right after the change that got that version, and that version in
// canonical form. It can go back as far as the history reaches (or to a
// state kept for a paged list); for a version older than that or newer than
// the current one it returns 410 Gone (a client asking for an exact version
// then relists), for one that is not a number 400 Bad Request. The server
// asks ListPage the same (pkg/registry/computed).
func (s *Store[T]) ListExact(namespace, resourceVersion string, match func(T) bool) (items []T, normalizedResourceVersion string, err error) {
	page, err := s.ListPage(namespace, match, PageOptions{ResourceVersion: resourceVersion})
	if err != nil {
		return nil, "", err
	}
	return page.Items, page.ResourceVersion, nil
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

// Peek hands out the held object itself; a shallow copy with a status of
// its own, upserted, replaces it without changing the object peeked (the
// store copies what it keeps), and the next Peek sees the new one.
func TestPeekThenUpsertAShallowCopy(t *testing.T) {
	s, _ := newTestStore()
	s.Upsert(obj("ns", "a", "Pending"))
	held, ok := s.Peek("ns", "a")
	if !ok {
		t.Fatal("Peek ns/a: not found")
	}
	if again, _ := s.Peek("ns", "a"); again != held {
		t.Error("Peek returned a copy; want the held object")
	}
	next := *held
	next.Status = courier.DownstreamCopyStatus{Phase: "Synced"}
	if n := s.Upsert(&next); n != 1 {
		t.Fatalf("Upsert of the changed row changed %d objects, want 1", n)
	}
	if held.Status.Phase != "Pending" {
		t.Errorf("the peeked object changed: %+v", held.Status)
	}
	now, _ := s.Peek("ns", "a")
	if now.Status.Phase != "Synced" || now == &next {
		t.Errorf("after Upsert Peek = %+v (the caller's object: %v); want a stored copy, Synced", now.Status, now == &next)
	}
}
