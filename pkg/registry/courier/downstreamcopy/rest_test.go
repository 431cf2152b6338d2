package downstreamcopy

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta/table"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/memstore"
)

var created = metav1.NewTime(time.Now().Add(-50 * time.Hour).Truncate(time.Second))

func row(ns, name, helmOp, cluster, kind, source string, phase courier.CopyPhase, lbls map[string]string) *courier.DownstreamCopy {
	return &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, CreationTimestamp: created},
		Spec: courier.DownstreamCopySpec{
			HelmOp:  helmOp,
			Cluster: cluster,
			Source:  courier.CopySource{Kind: kind, Name: source, ResourceVersion: "42"},
			Target:  courier.CopyTarget{Namespace: "apps", Name: source},
		},
		Status: courier.DownstreamCopyStatus{Phase: phase},
	}
}

func fixtures() []*courier.DownstreamCopy {
	synced := row("fleet-default", "app.c1.secret.s1", "app", "c1", "Secret", "s1", courier.CopyPhaseSynced, map[string]string{"team": "a"})
	synced.Status.Message = "copied"
	synced.Status.SyncedResourceVersion = "42"
	return []*courier.DownstreamCopy{
		synced,
		row("fleet-default", "app.c2.configmap.cm1", "app", "c2", "ConfigMap", "cm1", courier.CopyPhaseForbidden, map[string]string{"team": "b"}),
		row("fleet-default", "other.c1.secret.s1", "other", "c1", "Secret", "s1", courier.CopyPhasePending, map[string]string{"team": "a"}),
		row("ws2", "app.c1.secret.s2", "app", "c1", "Secret", "s2", courier.CopyPhaseSynced, nil),
	}
}

func newTestREST(t *testing.T) (*REST, *memstore.Store[*courier.DownstreamCopy]) {
	t.Helper()
	store := memstore.New[*courier.DownstreamCopy](memstore.WithInitialResourceVersion(1000))
	store.Replace(fixtures())
	return NewREST(store, testDeliveredBy), store
}

func ctxIn(ns string) context.Context {
	return genericapirequest.WithNamespace(genericapirequest.NewContext(), ns)
}

func names(items []courier.DownstreamCopy) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Namespace+"/"+it.Name)
	}
	return out
}

func TestList(t *testing.T) {
	all := []string{"fleet-default/app.c1.secret.s1", "fleet-default/app.c2.configmap.cm1", "fleet-default/other.c1.secret.s1", "ws2/app.c1.secret.s2"}
	tcs := []struct {
		name      string
		namespace string
		options   *metainternalversion.ListOptions
		want      []string
		wantErr   func(error) bool
	}{
		{name: "all namespaces, nil options", want: all},
		{name: "all namespaces, empty selectors", options: &metainternalversion.ListOptions{LabelSelector: labels.Everything(), FieldSelector: fields.Everything()}, want: all},
		{name: "namespace", namespace: "ws2", want: []string{"ws2/app.c1.secret.s2"}},
		{name: "namespace without rows", namespace: "nope"},
		{name: "label selector", options: &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"team": "a"})}, want: []string{"fleet-default/app.c1.secret.s1", "fleet-default/other.c1.secret.s1"}},
		{name: "label exists", options: &metainternalversion.ListOptions{LabelSelector: mustLabels(t, "team")}, want: all[:3]},
		{name: "label does not exist", options: &metainternalversion.ListOptions{LabelSelector: mustLabels(t, "!team")}, want: all[3:]},
		{name: "metadata.name", options: fieldOpts(t, "metadata.name=app.c1.secret.s2"), want: []string{"ws2/app.c1.secret.s2"}},
		{name: "metadata.namespace", options: fieldOpts(t, "metadata.namespace=ws2"), want: []string{"ws2/app.c1.secret.s2"}},
		{name: "spec.helmOp", options: fieldOpts(t, "spec.helmOp=other"), want: []string{"fleet-default/other.c1.secret.s1"}},
		{name: "spec.cluster", options: fieldOpts(t, "spec.cluster=c2"), want: []string{"fleet-default/app.c2.configmap.cm1"}},
		{name: "spec.source.kind", options: fieldOpts(t, "spec.source.kind=ConfigMap"), want: []string{"fleet-default/app.c2.configmap.cm1"}},
		{name: "spec.source.name", options: fieldOpts(t, "spec.source.name=s1"), want: []string{"fleet-default/app.c1.secret.s1", "fleet-default/other.c1.secret.s1"}},
		{name: "status.phase", options: fieldOpts(t, "status.phase=Synced"), want: []string{"fleet-default/app.c1.secret.s1", "ws2/app.c1.secret.s2"}},
		{name: "status.phase not equal", options: fieldOpts(t, "status.phase!=Synced"), want: []string{"fleet-default/app.c2.configmap.cm1", "fleet-default/other.c1.secret.s1"}},
		{name: "two fields", options: fieldOpts(t, "spec.helmOp=app,spec.cluster=c1"), want: []string{"fleet-default/app.c1.secret.s1", "ws2/app.c1.secret.s2"}},
		{
			name:      "namespace, label and field together",
			namespace: "fleet-default",
			options: &metainternalversion.ListOptions{
				LabelSelector: labels.SelectorFromSet(labels.Set{"team": "a"}),
				FieldSelector: fields.SelectorFromSet(fields.Set{"spec.cluster": "c1", "status.phase": "Pending"}),
			},
			want: []string{"fleet-default/other.c1.secret.s1"},
		},
		{name: "unsupported field", options: fieldOpts(t, "spec.serviceAccount=x"), wantErr: apierrors.IsBadRequest},
		{name: "a continue token that cannot be read", options: &metainternalversion.ListOptions{Limit: 1, Continue: "whatever"}, wantErr: apierrors.IsBadRequest},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			r, store := newTestREST(t)
			got, err := r.List(ctxIn(tc.namespace), tc.options)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("List error = %v, want a different one", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			list, ok := got.(*courier.DownstreamCopyList)
			if !ok {
				t.Fatalf("List returned %T, want *courier.DownstreamCopyList", got)
			}
			if !reflect.DeepEqual(names(list.Items), tc.want) {
				t.Errorf("List = %v, want %v", names(list.Items), tc.want)
			}
			if _, rv := store.List("", nil); list.ResourceVersion != rv || rv == "" {
				t.Errorf("list resourceVersion %q, want the store's %q", list.ResourceVersion, rv)
			}
			if list.Continue != "" {
				t.Errorf("continue token %q, want none", list.Continue)
			}
			for _, it := range list.Items {
				if it.ResourceVersion == "" || it.UID == "" {
					t.Errorf("%s/%s has resourceVersion %q, uid %q", it.Namespace, it.Name, it.ResourceVersion, it.UID)
				}
			}
		})
	}
}

func TestListPages(t *testing.T) {
	tcs := []struct {
		name    string
		options metainternalversion.ListOptions
		want    [][]string
	}{
		{
			name:    "limit 3",
			options: metainternalversion.ListOptions{Limit: 3},
			want:    [][]string{{"fleet-default/app.c1.secret.s1", "fleet-default/app.c2.configmap.cm1", "fleet-default/other.c1.secret.s1"}, {"ws2/app.c1.secret.s2"}},
		},
		{
			name:    "limit 1 with a field selector",
			options: *fieldOpts(t, "spec.helmOp=app"),
			want:    [][]string{{"fleet-default/app.c1.secret.s1"}, {"fleet-default/app.c2.configmap.cm1"}, {"ws2/app.c1.secret.s2"}},
		},
	}
	tcs[1].options.Limit = 1
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			r, store := newTestREST(t)
			_, rv := store.List("", nil)
			opts := tc.options
			var got [][]string
			for {
				obj, err := r.List(ctxIn(""), &opts)
				if err != nil {
					t.Fatalf("page %d: %v", len(got)+1, err)
				}
				list := obj.(*courier.DownstreamCopyList)
				got = append(got, names(list.Items))
				if list.ResourceVersion != rv {
					t.Errorf("page %d: resourceVersion %s, want %s", len(got), list.ResourceVersion, rv)
				}
				// A change between pages does not show.
				store.Replace(fixtures()[:1])
				if list.Continue == "" || len(got) > len(tc.want) {
					break
				}
				opts.Continue = list.Continue
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pages = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestListExactResourceVersion(t *testing.T) {
	r, store := newTestREST(t)
	_, before := store.List("", nil)
	store.Replace(fixtures()[1:])
	got, err := r.List(ctxIn(""), &metainternalversion.ListOptions{ResourceVersion: before, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatalf("List at %s: %v", before, err)
	}
	if list := got.(*courier.DownstreamCopyList); len(list.Items) != 4 || list.ResourceVersion != before {
		t.Errorf("List at %s = %v (rv %s), want the 4 rows of then", before, names(list.Items), list.ResourceVersion)
	}
	if _, err := r.List(ctxIn(""), &metainternalversion.ListOptions{ResourceVersion: "5", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsResourceExpired(err) {
		t.Errorf("List at an unknown version: error %v, want 410 Expired", err)
	}
}

func mustLabels(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func fieldOpts(t *testing.T, s string) *metainternalversion.ListOptions {
	t.Helper()
	sel, err := fields.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return &metainternalversion.ListOptions{FieldSelector: sel}
}

func TestGet(t *testing.T) {
	tcs := []struct {
		name      string
		namespace string
		get       string
		want      *courier.DownstreamCopy
	}{
		{name: "found", namespace: "fleet-default", get: "app.c1.secret.s1", want: fixtures()[0]},
		{name: "found in another namespace", namespace: "ws2", get: "app.c1.secret.s2", want: fixtures()[3]},
		{name: "wrong namespace", namespace: "ws2", get: "app.c1.secret.s1"},
		{name: "no such name", namespace: "fleet-default", get: "nope"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newTestREST(t)
			got, err := r.Get(ctxIn(tc.namespace), tc.get, &metav1.GetOptions{})
			if tc.want == nil {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("Get error = %v, want NotFound", err)
				}
				d := err.(apierrors.APIStatus).Status().Details
				if d == nil || d.Group != "courier.dev" || d.Kind != "downstreamcopies" || d.Name != tc.get {
					t.Errorf("NotFound details = %+v, want courier.dev downstreamcopies %s", d, tc.get)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			o := got.(*courier.DownstreamCopy)
			if o.ResourceVersion == "" || o.UID == "" {
				t.Errorf("resourceVersion %q, uid %q: want both set", o.ResourceVersion, o.UID)
			}
			o.ResourceVersion, o.UID = "", ""
			if !reflect.DeepEqual(o, tc.want) {
				t.Errorf("Get = %+v, want %+v", o, tc.want)
			}
		})
	}
}

func TestWatch(t *testing.T) {
	r, store := newTestREST(t)
	ctx, cancel := context.WithCancel(ctxIn("fleet-default"))
	defer cancel()
	opts := fieldOpts(t, "status.phase=Synced")
	opts.SendInitialEvents = ptr.To(true)
	opts.AllowWatchBookmarks = true
	opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	w, err := r.Watch(ctx, opts)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()

	next := func() (watch.EventType, *courier.DownstreamCopy) {
		t.Helper()
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			return e.Type, e.Object.(*courier.DownstreamCopy)
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
		return "", nil
	}
	if typ, o := next(); typ != watch.Added || o.Name != "app.c1.secret.s1" {
		t.Fatalf("first event %s %s, want Added app.c1.secret.s1 (the only Synced row in fleet-default)", typ, o.Name)
	}
	typ, bm := next()
	if _, rv := store.List("", nil); typ != watch.Bookmark || bm.ResourceVersion != rv || bm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("second event %s rv=%s annotations=%v, want the initial-events-end Bookmark at %s", typ, bm.ResourceVersion, bm.Annotations, rv)
	}
	tbl, err := r.ConvertToTable(ctx, bm, nil)
	if err != nil || len(tbl.Rows) != 1 || tbl.Rows[0].Object.Object != bm {
		t.Fatalf("ConvertToTable(bookmark) = %+v, %v; want one row holding the bookmark", tbl, err)
	}

	objs := fixtures()
	objs[0].Status.Phase = courier.CopyPhaseConflict
	store.Replace(objs)
	if typ, o := next(); typ != watch.Deleted || o.Name != "app.c1.secret.s1" || o.Status.Phase != courier.CopyPhaseSynced {
		t.Fatalf("after the phase changed: %s %s %s, want Deleted app.c1.secret.s1 in its last Synced state", typ, o.Name, o.Status.Phase)
	}
	objs[2].Status.Phase = courier.CopyPhaseSynced
	objs[3].Status.Phase = courier.CopyPhasePending // other namespace: not seen
	store.Replace(objs)
	if typ, o := next(); typ != watch.Added || o.Name != "other.c1.secret.s1" {
		t.Fatalf("after a row became Synced: %s %s, want Added other.c1.secret.s1", typ, o.Name)
	}

	if _, err := r.Watch(ctx, fieldOpts(t, "spec.target.namespace=apps")); !apierrors.IsBadRequest(err) {
		t.Errorf("watch on an unsupported field: error %v, want BadRequest", err)
	}
	cancel()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("watch not closed after its context was cancelled")
		}
	}
}

// testDeliveredBy names a replica per Cluster, as the Manager's view would.
func testDeliveredBy(_, cluster string) string {
	if cluster == "" {
		return ""
	}
	return "courier-" + cluster
}

func TestConvertToTable(t *testing.T) {
	r, _ := newTestREST(t)
	ctx := ctxIn("")
	wantColumns := []struct {
		name     string
		priority int32
	}{
		{"Name", 0}, {"HelmOp", 0}, {"Cluster", 0}, {"Kind", 0}, {"Source", 0}, {"Namespace", 0}, {"Phase", 0}, {"Age", 0},
		{"Message", 1}, {"Synced-RV", 1}, {"Delivered-By", 1},
	}
	age := table.ConvertToHumanReadableDateType(created)
	if age == "<unknown>" {
		t.Fatal("test fixtures have no creationTimestamp")
	}

	listObj, err := r.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	list := listObj.(*courier.DownstreamCopyList)
	list.Continue = "token"

	tcs := []struct {
		name        string
		object      runtime.Object
		options     runtime.Object
		wantRV      string
		wantCont    string
		wantHeaders bool
		wantRows    [][]interface{}
	}{
		{
			name:        "list",
			object:      list,
			wantRV:      list.ResourceVersion,
			wantCont:    "token",
			wantHeaders: true,
			wantRows: [][]interface{}{
				{"app.c1.secret.s1", "app", "c1", "Secret", "s1", "apps", "Synced", age, "copied", "42", "courier-c1"},
				{"app.c2.configmap.cm1", "app", "c2", "ConfigMap", "cm1", "apps", "Forbidden", age, "", "", "courier-c2"},
				{"other.c1.secret.s1", "other", "c1", "Secret", "s1", "apps", "Pending", age, "", "", "courier-c1"},
				{"app.c1.secret.s2", "app", "c1", "Secret", "s2", "apps", "Synced", age, "", "", "courier-c1"},
			},
		},
		{
			name:        "single object",
			object:      &list.Items[0],
			options:     &metav1.TableOptions{},
			wantRV:      list.Items[0].ResourceVersion,
			wantHeaders: true,
			wantRows:    [][]interface{}{{"app.c1.secret.s1", "app", "c1", "Secret", "s1", "apps", "Synced", age, "copied", "42", "courier-c1"}},
		},
		{
			name:     "no headers",
			object:   &list.Items[1],
			options:  &metav1.TableOptions{NoHeaders: true},
			wantRV:   list.Items[1].ResourceVersion,
			wantRows: [][]interface{}{{"app.c2.configmap.cm1", "app", "c2", "ConfigMap", "cm1", "apps", "Forbidden", age, "", "", "courier-c2"}},
		},
		{
			name:        "nil table options",
			object:      &list.Items[1],
			options:     (*metav1.TableOptions)(nil),
			wantRV:      list.Items[1].ResourceVersion,
			wantHeaders: true,
			wantRows:    [][]interface{}{{"app.c2.configmap.cm1", "app", "c2", "ConfigMap", "cm1", "apps", "Forbidden", age, "", "", "courier-c2"}},
		},
		{
			name:        "bookmark",
			object:      &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}},
			wantRV:      "77",
			wantHeaders: true,
			wantRows:    [][]interface{}{{"", "", "", "", "", "", "", "<unknown>", "", "", ""}},
		},
		{
			name:        "empty list",
			object:      &courier.DownstreamCopyList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}},
			wantRV:      "5",
			wantHeaders: true,
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := r.ConvertToTable(ctx, tc.object, tc.options)
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			if tbl.ResourceVersion != tc.wantRV || tbl.Continue != tc.wantCont {
				t.Errorf("table resourceVersion %q continue %q, want %q %q", tbl.ResourceVersion, tbl.Continue, tc.wantRV, tc.wantCont)
			}
			if !tc.wantHeaders {
				if len(tbl.ColumnDefinitions) != 0 {
					t.Errorf("%d column definitions with noHeaders", len(tbl.ColumnDefinitions))
				}
			} else {
				if len(tbl.ColumnDefinitions) != len(wantColumns) {
					t.Fatalf("%d columns, want %d", len(tbl.ColumnDefinitions), len(wantColumns))
				}
				for i, c := range tbl.ColumnDefinitions {
					if c.Name != wantColumns[i].name || c.Priority != wantColumns[i].priority || c.Type != "string" || c.Description == "" {
						t.Errorf("column %d = %+v, want %s with priority %d, type string and a description", i, c, wantColumns[i].name, wantColumns[i].priority)
					}
				}
				if tbl.ColumnDefinitions[0].Format != "name" {
					t.Errorf("Name column format %q, want name", tbl.ColumnDefinitions[0].Format)
				}
			}
			if len(tbl.Rows) != len(tc.wantRows) {
				t.Fatalf("%d rows, want %d", len(tbl.Rows), len(tc.wantRows))
			}
			for i, row := range tbl.Rows {
				if !reflect.DeepEqual(row.Cells, tc.wantRows[i]) {
					t.Errorf("row %d cells\n got %q\nwant %q", i, row.Cells, tc.wantRows[i])
				}
				if len(row.Cells) != len(wantColumns) {
					t.Errorf("row %d has %d cells for %d columns", i, len(row.Cells), len(wantColumns))
				}
				o, ok := row.Object.Object.(*courier.DownstreamCopy)
				if !ok {
					t.Fatalf("row %d object is %T, want *courier.DownstreamCopy", i, row.Object.Object)
				}
				if o.Name != tc.wantRows[i][0] {
					t.Errorf("row %d holds object %q, want %q", i, o.Name, tc.wantRows[i][0])
				}
			}
		})
	}
	t.Run("a foreign object is an error", func(t *testing.T) {
		if _, err := r.ConvertToTable(ctx, &courier.FieldCopy{}, nil); err == nil {
			t.Error("no error")
		}
	})
}

func TestNames(t *testing.T) {
	r, _ := newTestREST(t)
	if _, ok := r.New().(*courier.DownstreamCopy); !ok {
		t.Errorf("New() = %T", r.New())
	}
	if _, ok := r.NewList().(*courier.DownstreamCopyList); !ok {
		t.Errorf("NewList() = %T", r.NewList())
	}
	if !r.NamespaceScoped() {
		t.Error("not namespaced")
	}
	if got := r.GetSingularName(); got != "downstreamcopy" {
		t.Errorf("singular name %q", got)
	}
	if got := r.ShortNames(); !reflect.DeepEqual(got, []string{"dcp"}) {
		t.Errorf("short names %q, want [dcp]", got)
	}
	if got := r.Categories(); !reflect.DeepEqual(got, []string{"courier"}) {
		t.Errorf("categories %q, want [courier]", got)
	}
	if got := r.Kind(); got != "DownstreamCopy" {
		t.Errorf("kind %q", got)
	}
	r.Destroy()
}

// TestSelectableFields keeps the fields the registry fills in step with the
// field labels the scheme accepts.
func TestSelectableFields(t *testing.T) {
	var got []string
	for k := range selectableFields(fixtures()[0]) {
		got = append(got, k)
	}
	want := append([]string(nil), v1alpha1.DownstreamCopyFieldLabels...)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("selectable fields %v, scheme field labels %v", got, want)
	}
}

// TestWatchPinningClusterIsIndexed: a watch whose field selector requires
// spec.cluster=<value> (every agent's) is filed under that value, and a
// watch that only excludes a Cluster, or pins nothing, is not.
func TestWatchPinningClusterIsIndexed(t *testing.T) {
	store := memstore.New[*courier.DownstreamCopy](WatchIndex())
	store.Replace([]*courier.DownstreamCopy{
		row("fleet-default", "app.c1.secret.s1", "app", "c1", "Secret", "s1", courier.CopyPhaseSynced, nil),
		row("fleet-default", "app.c2.secret.s1", "app", "c2", "Secret", "s1", courier.CopyPhaseSynced, nil),
	})
	r := NewREST(store, nil)
	ctx, cancel := context.WithCancel(ctxIn("fleet-default"))
	defer cancel()
	for _, tc := range []struct {
		selector string
		filed    map[string]int
	}{
		{"spec.cluster=c1", map[string]int{"c1": 1}},
		{"status.phase=Synced,spec.cluster==c2", map[string]int{"c1": 1, "c2": 1}},
		{"spec.cluster!=c1", map[string]int{"c1": 1, "c2": 1}},
		{"status.phase=Synced", map[string]int{"c1": 1, "c2": 1}},
	} {
		w, err := r.Watch(ctx, fieldOpts(t, tc.selector))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for c, n := range tc.filed {
			if got := store.IndexedWatchers(c); got != n {
				t.Errorf("after a watch with %q: %d watchers filed under %s, want %d", tc.selector, got, c, n)
			}
		}
		if tc.selector == "spec.cluster=c1" {
			if e := <-w.ResultChan(); e.Object.(*courier.DownstreamCopy).Spec.Cluster != "c1" {
				t.Errorf("the indexed watch's initial event: %+v", e.Object)
			}
		}
	}
}
