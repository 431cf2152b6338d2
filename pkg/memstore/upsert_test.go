package memstore

import (
	"fmt"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

func TestUpsertAndDelete(t *testing.T) {
	initial := []*dcp{obj("ns", "a", "Pending"), obj("ns", "b", "Pending"), obj("other", "c", "Synced")}
	tcs := []struct {
		name        string
		upsert      []*dcp
		delete      []Key
		wantChanged int
		want        []ev
		wantList    []string // namespace/name phase, after the change
	}{
		{
			name:     "nothing",
			wantList: []string{"ns/a Pending", "ns/b Pending", "other/c Synced"},
		},
		{
			name:     "an equal object is no change",
			upsert:   []*dcp{obj("ns", "b", "Pending", func(o *dcp) { o.ResourceVersion = "999"; o.UID = "other" })},
			wantList: []string{"ns/a Pending", "ns/b Pending", "other/c Synced"},
		},
		{
			name:        "modify one, leave the others",
			upsert:      []*dcp{obj("ns", "b", "Synced")},
			wantChanged: 1,
			want:        []ev{{Type: watch.Modified, Namespace: "ns", Name: "b", RV: rv(4), Phase: "Synced"}},
			wantList:    []string{"ns/a Pending", "ns/b Synced", "other/c Synced"},
		},
		{
			name:        "in the order given, not sorted; unchanged ones skipped",
			upsert:      []*dcp{obj("z", "new", "Pending"), obj("ns", "a", "Pending"), obj("ns", "b", "Conflict"), obj("a", "new", "Kept")},
			wantChanged: 3,
			want: []ev{
				{Type: watch.Added, Namespace: "z", Name: "new", RV: rv(4), Phase: "Pending"},
				{Type: watch.Modified, Namespace: "ns", Name: "b", RV: rv(5), Phase: "Conflict"},
				{Type: watch.Added, Namespace: "a", Name: "new", RV: rv(6), Phase: "Kept"},
			},
			wantList: []string{"a/new Kept", "ns/a Pending", "ns/b Conflict", "other/c Synced", "z/new Pending"},
		},
		{
			name:        "the same key twice: both, in turn",
			upsert:      []*dcp{obj("ns", "a", "Synced"), obj("ns", "a", "Conflict"), obj("ns", "a", "Conflict")},
			wantChanged: 2,
			want: []ev{
				{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(4), Phase: "Synced"},
				{Type: watch.Modified, Namespace: "ns", Name: "a", RV: rv(5), Phase: "Conflict"},
			},
			wantList: []string{"ns/a Conflict", "ns/b Pending", "other/c Synced"},
		},
		{
			name:        "delete in the order given; unknown keys ignored",
			delete:      []Key{{Namespace: "other", Name: "c"}, {Namespace: "ns", Name: "nope"}, {Namespace: "ns", Name: "a"}, {Namespace: "ns", Name: "a"}},
			wantChanged: 2,
			want: []ev{
				{Type: watch.Deleted, Namespace: "other", Name: "c", RV: rv(4), Phase: "Synced"},
				{Type: watch.Deleted, Namespace: "ns", Name: "a", RV: rv(5), Phase: "Pending"},
			},
			wantList: []string{"ns/b Pending"},
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore()
			s.Replace(initial)
			w := mustWatch(t, s, "", nil, &metainternalversion.ListOptions{ResourceVersion: rv(len(initial))})

			var changed int
			if tc.upsert != nil {
				changed = s.Upsert(tc.upsert...)
			}
			if tc.delete != nil {
				changed = s.Delete(tc.delete...)
			}

			if changed != tc.wantChanged {
				t.Errorf("changed = %d, want %d", changed, tc.wantChanged)
			}
			expectEvents(t, w, tc.want)
			items, gotRV := s.List("", nil)
			var got []string
			for _, it := range items {
				got = append(got, fmt.Sprintf("%s/%s %s", it.Namespace, it.Name, it.Status.Phase))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantList) {
				t.Errorf("List = %v, want %v", got, tc.wantList)
			}
			if wantRV := rv(len(initial) + len(tc.want)); gotRV != wantRV {
				t.Errorf("resourceVersion %s, want %s", gotRV, wantRV)
			}
			for _, o := range tc.upsert {
				if o.ResourceVersion != "" && o.ResourceVersion != "999" {
					t.Errorf("Upsert modified its input: %s/%s has resourceVersion %q", o.Namespace, o.Name, o.ResourceVersion)
				}
			}
		})
	}
}

func TestUpsertStampsMetadata(t *testing.T) {
	s, clock := newTestStore()
	in := obj("ns", "a", "Pending")
	s.Upsert(in)
	a1, _ := s.Get("ns", "a")
	created := metav1.NewTime(t0)
	if a1.ResourceVersion != rv(1) || !a1.CreationTimestamp.Equal(&created) || a1.UID == "" {
		t.Fatalf("new object: rv=%q created=%v uid=%q; want rv=%s created=%v and a uid", a1.ResourceVersion, a1.CreationTimestamp, a1.UID, rv(1), created)
	}

	in.Status.Phase = "Mutated"
	if got, _ := s.Get("ns", "a"); got.Status.Phase != "Pending" {
		t.Errorf("stored object changed through the caller's pointer: phase %s", got.Status.Phase)
	}

	clock.Set(t0.Add(time.Hour))
	s.Upsert(obj("ns", "a", "Synced", func(o *dcp) { o.UID = "ignored"; o.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute)) }))
	a2, _ := s.Get("ns", "a")
	if a2.ResourceVersion != rv(2) || !a2.CreationTimestamp.Equal(&created) || a2.UID != a1.UID {
		t.Errorf("changed object: rv=%q created=%v uid=%q; want rv=%s created=%v uid=%q", a2.ResourceVersion, a2.CreationTimestamp, a2.UID, rv(2), created, a1.UID)
	}

	s.Delete(Key{Namespace: "ns", Name: "a"})
	s.Upsert(obj("ns", "a", "Synced"))
	a3, _ := s.Get("ns", "a")
	later := metav1.NewTime(t0.Add(time.Hour))
	if a3.UID == a1.UID || !a3.CreationTimestamp.Equal(&later) || a3.ResourceVersion != rv(4) {
		t.Errorf("re-added object: rv=%q created=%v uid=%q; want rv=%s created=%v and a new uid", a3.ResourceVersion, a3.CreationTimestamp, a3.UID, rv(4), later)
	}
}

func TestEqualIgnoringServerFields(t *testing.T) {
	base := func(mods ...func(*dcp)) *dcp {
		o := obj("ns", "a", "Synced")
		o.ResourceVersion, o.UID, o.CreationTimestamp = "5", "u1", metav1.NewTime(t0)
		for _, m := range mods {
			m(o)
		}
		return o
	}
	tcs := []struct {
		name string
		b    *dcp
		want bool
	}{
		{name: "same", b: base(), want: true},
		{name: "resourceVersion, uid, creationTimestamp differ", b: base(func(o *dcp) {
			o.ResourceVersion, o.UID, o.CreationTimestamp = "6", "u2", metav1.NewTime(t0.Add(time.Hour))
		}), want: true},
		{name: "nil and empty labels", b: base(func(o *dcp) { o.Labels = map[string]string{} }), want: true},
		{name: "a label", b: base(func(o *dcp) { o.Labels = map[string]string{"k": "v"} })},
		{name: "an annotation", b: base(func(o *dcp) { o.Annotations = map[string]string{"k": "v"} })},
		{name: "the name", b: base(func(o *dcp) { o.Name = "b" })},
		{name: "the status", b: base(func(o *dcp) { o.Status.Message = "m" })},
		{name: "a condition time", b: base(func(o *dcp) {
			o.Status.Conditions = []metav1.Condition{{Type: "Ready", LastTransitionTime: metav1.NewTime(t0.Add(time.Second))}}
		})},
	}
	a := base()
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			if got := equalIgnoringServerFields(a, tc.b); got != tc.want {
				t.Errorf("equal = %v, want %v", got, tc.want)
			}
			if a.ResourceVersion != "5" || a.UID != "u1" || !a.CreationTimestamp.Equal(&metav1.Time{Time: t0}) {
				t.Errorf("the comparison modified its argument: %+v", a.ObjectMeta)
			}
		})
	}
}

// rows returns n rows spread over 100 namespaces, as 1,000 clusters × 10
// copies would be in a fleet with 100 workspaces.
func rows(n int, mods ...func(*dcp)) []*dcp {
	out := make([]*dcp, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, obj(fmt.Sprintf("ws%03d", i%100), fmt.Sprintf("row%05d", i), "Synced", mods...))
	}
	return out
}

func BenchmarkUpsertOneOf10000(b *testing.B) {
	s := New[*dcp]()
	s.Replace(rows(10000))
	phases := []courier.CopyPhase{"Pending", "Synced"}
	in := make([]*dcp, 0, 10000)
	for i := 0; i < 10000; i++ {
		in = append(in, obj(fmt.Sprintf("ws%03d", i%100), fmt.Sprintf("row%05d", i), "Synced"))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o := in[i%len(in)]
		o.Status.Phase = phases[(i/len(in))%2]
		s.Upsert(o)
	}
}

func BenchmarkReplace10000(b *testing.B) {
	s := New[*dcp]()
	in := rows(10000)
	s.Replace(in)
	phases := []courier.CopyPhase{"Pending", "Synced"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// One row changes, as in BenchmarkUpsertOneOf10000.
		in[i%len(in)].Status.Phase = phases[(i/len(in))%2]
		s.Replace(in)
	}
}

// TestUpsertOwnedKeepsTheObject: UpsertOwned stores the object it is
// handed, server fields set, where Upsert stores a copy; both leave the
// store as it was for an equal object.
func TestUpsertOwnedKeepsTheObject(t *testing.T) {
	s, _ := newTestStore()
	s.Replace([]*dcp{obj("ns", "a", "Pending")})
	held, _ := s.Peek("ns", "a")

	copied := obj("ns", "a", "Synced")
	if n := s.Upsert(copied); n != 1 {
		t.Fatalf("Upsert changed %d objects, want 1", n)
	}
	if got, _ := s.Peek("ns", "a"); got == copied {
		t.Error("Upsert stored the object it was handed")
	}

	owned := *held // a shallow copy of a stored object, as the view makes
	owned.Status = courier.DownstreamCopyStatus{Phase: "Failed"}
	if n := s.UpsertOwned(&owned); n != 1 {
		t.Fatalf("UpsertOwned changed %d objects, want 1", n)
	}
	got, _ := s.Peek("ns", "a")
	if got != &owned {
		t.Fatal("UpsertOwned stored a copy")
	}
	if got.ResourceVersion != rv(3) || got.UID != held.UID || !got.CreationTimestamp.Equal(&held.CreationTimestamp) {
		t.Errorf("stored resourceVersion %s, uid %s, created %s; want %s, %s, %s",
			got.ResourceVersion, got.UID, got.CreationTimestamp, rv(3), held.UID, held.CreationTimestamp)
	}
	if held.ResourceVersion != rv(1) || held.Status.Phase != "Pending" {
		t.Errorf("the object stored before changed: resourceVersion %s, phase %s", held.ResourceVersion, held.Status.Phase)
	}

	same := owned
	if n := s.UpsertOwned(&same); n != 0 {
		t.Errorf("UpsertOwned of an equal object changed %d", n)
	}
	if got, _ := s.Peek("ns", "a"); got != &owned {
		t.Error("an equal object replaced the stored one")
	}
}
