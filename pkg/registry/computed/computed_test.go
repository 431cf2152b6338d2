package computed

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

func testResource() *Resource[*courier.DownstreamCopy] {
	return New(memstore.New[*courier.DownstreamCopy](), Spec[*courier.DownstreamCopy]{
		GroupResource: courier.Resource("downstreamcopies"),
		New:           func() *courier.DownstreamCopy { return &courier.DownstreamCopy{} },
		NewList: func(items []*courier.DownstreamCopy, rv string) runtime.Object {
			l := &courier.DownstreamCopyList{}
			l.ResourceVersion = rv
			for _, it := range items {
				l.Items = append(l.Items, *it)
			}
			return l
		},
		FieldLabels: []string{"spec.cluster"},
		Fields: func(o *courier.DownstreamCopy) fields.Set {
			return fields.Set{"spec.cluster": o.Spec.Cluster}
		},
	})
}

func TestPredicate(t *testing.T) {
	obj := &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "n", Labels: map[string]string{"a": "1"}},
		Spec:       courier.DownstreamCopySpec{Cluster: "c1"},
	}
	mustField := func(s string) fields.Selector {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	mustLabel := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	tcs := []struct {
		name      string
		options   *metainternalversion.ListOptions
		wantNil   bool // no filtering at all
		wantMatch bool
		wantErr   string
	}{
		{name: "nil options", wantNil: true},
		{name: "no selectors", options: &metainternalversion.ListOptions{}, wantNil: true},
		{name: "empty selectors", options: &metainternalversion.ListOptions{LabelSelector: labels.Everything(), FieldSelector: fields.Everything()}, wantNil: true},
		{name: "label matches", options: &metainternalversion.ListOptions{LabelSelector: mustLabel("a=1")}, wantMatch: true},
		{name: "label does not match", options: &metainternalversion.ListOptions{LabelSelector: mustLabel("a=2")}},
		{name: "metadata.name", options: &metainternalversion.ListOptions{FieldSelector: mustField("metadata.name=n")}, wantMatch: true},
		{name: "metadata.namespace", options: &metainternalversion.ListOptions{FieldSelector: mustField("metadata.namespace=other")}},
		{name: "own field", options: &metainternalversion.ListOptions{FieldSelector: mustField("spec.cluster=c1")}, wantMatch: true},
		{name: "own field differs", options: &metainternalversion.ListOptions{FieldSelector: mustField("spec.cluster!=c1")}},
		{name: "label and field", options: &metainternalversion.ListOptions{LabelSelector: mustLabel("a"), FieldSelector: mustField("spec.cluster=c1,metadata.name=n")}, wantMatch: true},
		{name: "label ok, field not", options: &metainternalversion.ListOptions{LabelSelector: mustLabel("a"), FieldSelector: mustField("spec.cluster=c2")}},
		{name: "unsupported field", options: &metainternalversion.ListOptions{FieldSelector: mustField("spec.helmOp=x")}, wantErr: `"spec.helmOp" is not supported for downstreamcopies.courier.dev`},
	}
	r := testResource()
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			match, err := r.Predicate(tc.options)
			if tc.wantErr != "" {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want BadRequest containing %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (match == nil) != tc.wantNil {
				t.Fatalf("predicate is nil: %v, want %v", match == nil, tc.wantNil)
			}
			if match != nil && match(obj) != tc.wantMatch {
				t.Errorf("match = %v, want %v", !tc.wantMatch, tc.wantMatch)
			}
		})
	}
}

func TestFieldSet(t *testing.T) {
	obj := &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "n"}, Spec: courier.DownstreamCopySpec{Cluster: "c1"}}
	want := fields.Set{"metadata.name": "n", "metadata.namespace": "ns", "spec.cluster": "c1"}
	if got := testResource().FieldSet(obj); !reflect.DeepEqual(got, want) {
		t.Errorf("FieldSet = %v, want %v", got, want)
	}
}

// seeded returns a resource over a store holding rows ns/r0 .. ns/r(n-1)
// (sorted by name: r0, r1, r10, ...), every third one labelled x=1.
func seeded(t *testing.T, n int, opts ...memstore.Option) (*Resource[*courier.DownstreamCopy], *memstore.Store[*courier.DownstreamCopy]) {
	t.Helper()
	r := testResource()
	r.store = memstore.New[*courier.DownstreamCopy](append([]memstore.Option{memstore.WithInitialResourceVersion(100)}, opts...)...)
	for i := 0; i < n; i++ {
		o := &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("r", i)}, Spec: courier.DownstreamCopySpec{Cluster: "c1"}}
		if i%3 == 0 {
			o.Labels = map[string]string{"x": "1"}
		}
		r.store.Upsert(o)
	}
	return r, r.store
}

func ctxIn(ns string) context.Context {
	return genericapirequest.WithNamespace(genericapirequest.NewContext(), ns)
}

// listPages lists with options, following continue tokens, and returns the
// names on each page, each page's ListMeta and the first error.
func listPages(r *Resource[*courier.DownstreamCopy], ns string, options metainternalversion.ListOptions) ([][]string, []metav1.ListMeta, error) {
	var names [][]string
	var metas []metav1.ListMeta
	for {
		opts := options
		got, err := r.List(ctxIn(ns), &opts)
		if err != nil {
			return names, metas, err
		}
		l := got.(*courier.DownstreamCopyList)
		var page []string
		for _, it := range l.Items {
			page = append(page, it.Name)
		}
		names, metas = append(names, page), append(metas, l.ListMeta)
		if l.Continue == "" || len(names) > 100 {
			return names, metas, nil
		}
		// As client-go's pager does.
		options.Continue, options.ResourceVersion, options.ResourceVersionMatch = l.Continue, "", ""
	}
}

func TestListPaging(t *testing.T) {
	x1 := labels.SelectorFromSet(labels.Set{"x": "1"})
	tcs := []struct {
		name          string
		namespace     string
		options       metainternalversion.ListOptions
		before        func(s *memstore.Store[*courier.DownstreamCopy]) // between seeding and the list
		want          [][]string
		wantRV        string
		wantRemaining []int64 // -1: none
		wantErr       func(error) bool
	}{
		{name: "no limit", want: [][]string{{"r0", "r1", "r2", "r3", "r4"}}, wantRV: "105", wantRemaining: []int64{-1}},
		{name: "limit 2", options: metainternalversion.ListOptions{Limit: 2}, want: [][]string{{"r0", "r1"}, {"r2", "r3"}, {"r4"}}, wantRV: "105", wantRemaining: []int64{3, 1, -1}},
		{name: "limit 2 in the namespace", namespace: "ns", options: metainternalversion.ListOptions{Limit: 2}, want: [][]string{{"r0", "r1"}, {"r2", "r3"}, {"r4"}}, wantRV: "105", wantRemaining: []int64{3, 1, -1}},
		{name: "limit 1 with a label selector: no remaining count", options: metainternalversion.ListOptions{Limit: 1, LabelSelector: x1}, want: [][]string{{"r0"}, {"r3"}}, wantRV: "105", wantRemaining: []int64{-1, -1}},
		{name: "limit with a field selector", options: metainternalversion.ListOptions{Limit: 1, FieldSelector: fields.OneTermNotEqualSelector("metadata.name", "r1")}, want: [][]string{{"r0"}, {"r2"}, {"r3"}, {"r4"}}, wantRV: "105", wantRemaining: []int64{-1, -1, -1, -1}},
		{name: "resourceVersion 0: the whole list, whatever the limit", options: metainternalversion.ListOptions{Limit: 2, ResourceVersion: "0"}, want: [][]string{{"r0", "r1", "r2", "r3", "r4"}}, wantRV: "105", wantRemaining: []int64{-1}},
		{
			name:    "a limit with a resourceVersion: that version, in pages",
			options: metainternalversion.ListOptions{Limit: 2, ResourceVersion: "103"},
			before: func(s *memstore.Store[*courier.DownstreamCopy]) {
				s.Delete(memstore.Key{Namespace: "ns", Name: "r1"})
			},
			want: [][]string{{"r0", "r1"}, {"r2"}}, wantRV: "103", wantRemaining: []int64{1, -1},
		},
		{
			name:    "resourceVersionMatch=NotOlderThan: the current state, in pages",
			options: metainternalversion.ListOptions{Limit: 3, ResourceVersion: "103", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			want:    [][]string{{"r0", "r1", "r2"}, {"r3", "r4"}}, wantRV: "105", wantRemaining: []int64{2, -1},
		},
		{
			name:    "resourceVersionMatch=Exact, in pages",
			options: metainternalversion.ListOptions{Limit: 3, ResourceVersion: "104", ResourceVersionMatch: metav1.ResourceVersionMatchExact},
			want:    [][]string{{"r0", "r1", "r2"}, {"r3"}}, wantRV: "104", wantRemaining: []int64{1, -1},
		},
		{name: "a continue token that cannot be read", options: metainternalversion.ListOptions{Continue: "garbage"}, wantErr: apierrors.IsBadRequest},
		{name: "a resource version older than the history, with a limit", options: metainternalversion.ListOptions{Limit: 1, ResourceVersion: "7"}, wantErr: apierrors.IsResourceExpired},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			r, s := seeded(t, 5)
			if tc.before != nil {
				tc.before(s)
			}
			names, metas, err := listPages(r, tc.namespace, tc.options)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("error = %v, want a different one", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Errorf("pages = %v, want %v", names, tc.want)
			}
			for i, m := range metas {
				rem := int64(-1)
				if m.RemainingItemCount != nil {
					rem = *m.RemainingItemCount
				}
				if m.ResourceVersion != tc.wantRV || i < len(tc.wantRemaining) && rem != tc.wantRemaining[i] {
					t.Errorf("page %d: resourceVersion %s, remainingItemCount %d; want %s, %d", i+1, m.ResourceVersion, rem, tc.wantRV, tc.wantRemaining[i])
				}
			}
		})
	}
}

func TestListContinueErrors(t *testing.T) {
	r, s := seeded(t, 5, memstore.WithHistorySize(1), memstore.WithListSnapshots(0, time.Minute))
	first, err := r.List(ctxIn(""), &metainternalversion.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	token := first.(*courier.DownstreamCopyList).Continue
	if token == "" {
		t.Fatal("no continue token")
	}
	t.Run("a resource version with the token", func(t *testing.T) {
		_, err := r.List(ctxIn(""), &metainternalversion.ListOptions{Continue: token, ResourceVersion: "105"})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "specifying resource version is not allowed when using continue") {
			t.Errorf("error = %v, want 400", err)
		}
	})
	t.Run("resourceVersion 0 with the token is allowed", func(t *testing.T) {
		if _, err := r.List(ctxIn(""), &metainternalversion.ListOptions{Continue: token, ResourceVersion: "0"}); err != nil {
			t.Errorf("error = %v", err)
		}
	})
	t.Run("the token in another namespace", func(t *testing.T) {
		if _, err := r.List(ctxIn("other"), &metainternalversion.ListOptions{Continue: token}); !apierrors.IsBadRequest(err) {
			t.Errorf("error = %v, want 400", err)
		}
	})
	t.Run("expired: neither kept nor in the history", func(t *testing.T) {
		s.Upsert(&courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new1"}})
		s.Upsert(&courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new2"}})
		_, err := r.List(ctxIn(""), &metainternalversion.ListOptions{Continue: token})
		if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "The provided continue parameter is too old") {
			t.Errorf("error = %v, want 410 Expired", err)
		}
	})
}

func TestListTableKeepsPaging(t *testing.T) {
	r, _ := seeded(t, 5)
	r.spec.Cells = func(o *courier.DownstreamCopy, name, age string) []interface{} { return []interface{}{name} }
	page, err := r.List(ctxIn(""), &metainternalversion.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := r.ConvertToTable(context.Background(), page, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := page.(*courier.DownstreamCopyList)
	if tbl.Continue != l.Continue || tbl.Continue == "" || tbl.RemainingItemCount == nil || *tbl.RemainingItemCount != 3 || len(tbl.Rows) != 2 {
		t.Errorf("table: continue %q, remaining %v, %d rows; want the list's %q, 3, 2 rows", tbl.Continue, tbl.RemainingItemCount, len(tbl.Rows), l.Continue)
	}
}

// TestOnlyPins: a watch is filed with no selector of its own only when
// its selector is the index field's value and nothing else.
func TestOnlyPins(t *testing.T) {
	for _, tc := range []struct {
		field, label string
		want         bool
	}{
		{field: "spec.cluster=c1", want: true},
		{field: "spec.cluster==c1", want: true},
		{field: "spec.cluster=c1,metadata.name=n"},
		{field: "spec.cluster=c1", label: "a=1"},
		{field: "metadata.name=c1"},
	} {
		opts := &metainternalversion.ListOptions{FieldSelector: fields.ParseSelectorOrDie(tc.field)}
		if tc.label != "" {
			opts.LabelSelector = labels.SelectorFromSet(labels.Set{"a": "1"})
		}
		if got := onlyPins(opts, "spec.cluster"); got != tc.want {
			t.Errorf("%q %q: onlyPins %v, want %v", tc.field, tc.label, got, tc.want)
		}
	}
}

// TestIndexedWatchKeepsTheRestOfItsSelector: through a store indexed by
// spec.cluster, a watch pinned to c1 sees c1's rows only, and one that
// also selects by name or label still applies that part. Every watch
// selects r2's last change, which comes last: what a watch got before it
// is everything it got.
func TestIndexedWatchKeepsTheRestOfItsSelector(t *testing.T) {
	r := testResource()
	r.store = memstore.New[*courier.DownstreamCopy](memstore.WithWatchIndex("spec.cluster", func(o *courier.DownstreamCopy) string { return o.Spec.Cluster }))
	ctx := genericapirequest.WithNamespace(context.Background(), "ns")
	no := false
	watchWith := func(field, label string) <-chan string {
		opts := &metainternalversion.ListOptions{FieldSelector: fields.ParseSelectorOrDie(field), SendInitialEvents: &no}
		if label != "" {
			opts.LabelSelector = labels.SelectorFromSet(labels.Set{"a": label})
		}
		w, err := r.Watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		names := make(chan string, 10)
		go func() {
			for e := range w.ResultChan() {
				names <- string(e.Type) + " " + e.Object.(*courier.DownstreamCopy).Name
			}
		}()
		return names
	}
	pinned := watchWith("spec.cluster=c1", "")
	named := watchWith("spec.cluster=c1,metadata.name=r2", "")
	labelled := watchWith("spec.cluster=c1", "2")
	row := func(name, cluster, label, rv string) *courier.DownstreamCopy {
		return &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"a": label}},
			Spec: courier.DownstreamCopySpec{Cluster: cluster, Source: courier.CopySource{ResourceVersion: rv}}}
	}
	r.store.Upsert(row("r1", "c1", "1", "1"), row("r2", "c1", "2", "1"), row("r3", "c2", "2", "1"), row("r4", "c2", "1", "1"))
	r.store.Upsert(row("r2", "c1", "2", "2"))
	for _, tc := range []struct {
		name string
		got  <-chan string
		want []string
	}{
		{"spec.cluster=c1", pinned, []string{"ADDED r1", "ADDED r2", "MODIFIED r2"}},
		{"and metadata.name=r2", named, []string{"ADDED r2", "MODIFIED r2"}},
		{"and label a=2", labelled, []string{"ADDED r2", "MODIFIED r2"}},
	} {
		var got []string
		for len(got) == 0 || got[len(got)-1] != "MODIFIED r2" {
			select {
			case n := <-tc.got:
				got = append(got, n)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: got %v, want %v", tc.name, got, tc.want)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
