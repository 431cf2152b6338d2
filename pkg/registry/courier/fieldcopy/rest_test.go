package fieldcopy

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
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/memstore"
)

var created = metav1.NewTime(time.Now().Add(-3 * time.Hour).Truncate(time.Second))

func rule(ns, kind, name, path string, mode courier.FieldCopyMode, phase courier.FieldCopyPhase, src *courier.FieldCopySource, lbls map[string]string) *courier.FieldCopy {
	return &courier.FieldCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kind + "." + name + "." + path, Labels: lbls, CreationTimestamp: created},
		Spec: courier.FieldCopySpec{
			Target:          courier.FieldCopyTarget{APIVersion: "v1", Kind: kind, Name: name},
			DestinationPath: path,
			Source:          src,
			Literal:         src == nil,
			Mode:            mode,
		},
		Status: courier.FieldCopyStatus{Phase: phase},
	}
}

func fixtures() []*courier.FieldCopy {
	applied := rule("apps", "ConfigMap", "web", "data.ca", courier.FieldCopyModeReplace, courier.FieldCopyPhaseApplied,
		&courier.FieldCopySource{Resource: "secret", Namespace: "apps", Name: "tls", Path: "data[ca.crt]"}, map[string]string{"team": "a"})
	applied.Status.Message = "applied"
	return []*courier.FieldCopy{
		applied,
		rule("apps", "ConfigMap", "web", "data.mode", courier.FieldCopyModeReplace, courier.FieldCopyPhaseApplied, nil, map[string]string{"team": "b"}),
		rule("apps", "Deployment", "api", "spec.template", courier.FieldCopyModeMerge, courier.FieldCopyPhaseRefused,
			&courier.FieldCopySource{Resource: "deployments.v1.apps", Namespace: "other", Name: "base", Path: "spec.template"}, map[string]string{"team": "a"}),
		rule("ops", "ConfigMap", "web", "data.ca", courier.FieldCopyModeReplace, courier.FieldCopyPhaseSourceMissing,
			&courier.FieldCopySource{Resource: "secret", Name: "tls", Path: "data.ca"}, nil),
	}
}

func newTestREST(t *testing.T) (*REST, *memstore.Store[*courier.FieldCopy]) {
	t.Helper()
	store := memstore.New[*courier.FieldCopy]()
	store.Replace(fixtures())
	return NewREST(store), store
}

func ctxIn(ns string) context.Context {
	return genericapirequest.WithNamespace(genericapirequest.NewContext(), ns)
}

func fieldOpts(t *testing.T, s string) *metainternalversion.ListOptions {
	t.Helper()
	sel, err := fields.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return &metainternalversion.ListOptions{FieldSelector: sel}
}

func TestList(t *testing.T) {
	const (
		webCA    = "apps/ConfigMap.web.data.ca"
		webMode  = "apps/ConfigMap.web.data.mode"
		apiTmpl  = "apps/Deployment.api.spec.template"
		opsWebCA = "ops/ConfigMap.web.data.ca"
	)
	tcs := []struct {
		name      string
		namespace string
		options   *metainternalversion.ListOptions
		want      []string
		wantErr   func(error) bool
	}{
		{name: "all namespaces", want: []string{webCA, webMode, apiTmpl, opsWebCA}},
		{name: "namespace", namespace: "ops", want: []string{opsWebCA}},
		{name: "label selector", options: &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"team": "a"})}, want: []string{webCA, apiTmpl}},
		{name: "metadata.name", options: fieldOpts(t, "metadata.name=ConfigMap.web.data.ca"), want: []string{webCA, opsWebCA}},
		{name: "metadata.namespace", options: fieldOpts(t, "metadata.namespace=apps"), want: []string{webCA, webMode, apiTmpl}},
		{name: "spec.target.kind", options: fieldOpts(t, "spec.target.kind=Deployment"), want: []string{apiTmpl}},
		{name: "spec.target.name", options: fieldOpts(t, "spec.target.name=web"), want: []string{webCA, webMode, opsWebCA}},
		{name: "spec.destinationPath", options: fieldOpts(t, "spec.destinationPath=data.mode"), want: []string{webMode}},
		{name: "spec.mode", options: fieldOpts(t, "spec.mode=Merge"), want: []string{apiTmpl}},
		{name: "status.phase", options: fieldOpts(t, "status.phase=Applied"), want: []string{webCA, webMode}},
		{
			name:      "namespace, label and fields together",
			namespace: "apps",
			options: &metainternalversion.ListOptions{
				LabelSelector: labels.SelectorFromSet(labels.Set{"team": "a"}),
				FieldSelector: fields.SelectorFromSet(fields.Set{"spec.target.kind": "ConfigMap", "status.phase": "Applied"}),
			},
			want: []string{webCA},
		},
		{name: "unsupported field", options: fieldOpts(t, "spec.source.name=tls"), wantErr: apierrors.IsBadRequest},
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
			list := got.(*courier.FieldCopyList)
			var names []string
			for _, it := range list.Items {
				names = append(names, it.Namespace+"/"+it.Name)
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Errorf("List = %v, want %v", names, tc.want)
			}
			if _, rv := store.List("", nil); list.ResourceVersion != rv || rv == "" {
				t.Errorf("list resourceVersion %q, want the store's %q", list.ResourceVersion, rv)
			}
		})
	}
}

func TestGet(t *testing.T) {
	r, _ := newTestREST(t)
	got, err := r.Get(ctxIn("ops"), "ConfigMap.web.data.ca", &metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	o := got.(*courier.FieldCopy)
	o.ResourceVersion, o.UID = "", ""
	if want := fixtures()[3]; !reflect.DeepEqual(o, want) {
		t.Errorf("Get = %+v, want %+v", o, want)
	}
	for _, tc := range []struct{ namespace, name string }{{"ops", "ConfigMap.web.data.mode"}, {"other", "ConfigMap.web.data.ca"}} {
		_, err := r.Get(ctxIn(tc.namespace), tc.name, &metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("Get %s/%s: error %v, want NotFound", tc.namespace, tc.name, err)
			continue
		}
		if d := err.(apierrors.APIStatus).Status().Details; d == nil || d.Group != "courier.dev" || d.Kind != "fieldcopies" || d.Name != tc.name {
			t.Errorf("NotFound details %+v", d)
		}
	}
}

func TestWatch(t *testing.T) {
	r, store := newTestREST(t)
	ctx, cancel := context.WithCancel(ctxIn("apps"))
	defer cancel()
	opts := fieldOpts(t, "spec.mode=Replace")
	opts.SendInitialEvents = ptr.To(true)
	opts.AllowWatchBookmarks = true
	w, err := r.Watch(ctx, opts)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()
	var got []string
	collect := func(n int) {
		for i := 0; i < n; i++ {
			select {
			case e := <-w.ResultChan():
				o := e.Object.(*courier.FieldCopy)
				got = append(got, string(e.Type)+" "+o.Name+" "+string(o.Spec.Mode)+" "+o.Annotations[metav1.InitialEventsAnnotationKey])
			case <-time.After(5 * time.Second):
				t.Fatalf("no event after %v", got)
			}
		}
	}
	collect(3)
	objs := fixtures()
	objs[1].Spec.Mode = courier.FieldCopyModeMerge
	store.Replace(objs)
	collect(1)
	want := []string{
		"ADDED ConfigMap.web.data.ca Replace ",
		"ADDED ConfigMap.web.data.mode Replace ",
		"BOOKMARK   true",
		"DELETED ConfigMap.web.data.mode Replace ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
	if _, err := r.Watch(ctx, fieldOpts(t, "status.message=x")); !apierrors.IsBadRequest(err) {
		t.Errorf("watch on an unsupported field: error %v, want BadRequest", err)
	}
}

func TestConvertToTable(t *testing.T) {
	r, _ := newTestREST(t)
	wantColumns := []string{"Name", "Target", "Path", "Source", "Mode", "Phase", "Age", "Message"}
	age := table.ConvertToHumanReadableDateType(created)
	listObj, err := r.List(ctxIn(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	list := listObj.(*courier.FieldCopyList)

	tcs := []struct {
		name        string
		object      runtime.Object
		options     runtime.Object
		wantRV      string
		wantHeaders bool
		wantRows    [][]interface{}
	}{
		{
			name:        "list",
			object:      list,
			wantRV:      list.ResourceVersion,
			wantHeaders: true,
			wantRows: [][]interface{}{
				{"ConfigMap.web.data.ca", "ConfigMap/web", "data.ca", "secret:apps/tls:data[ca.crt]", "Replace", "Applied", age, "applied"},
				{"ConfigMap.web.data.mode", "ConfigMap/web", "data.mode", "json literal", "Replace", "Applied", age, ""},
				{"Deployment.api.spec.template", "Deployment/api", "spec.template", "deployments.v1.apps:other/base:spec.template", "Merge", "Refused", age, ""},
				{"ConfigMap.web.data.ca", "ConfigMap/web", "data.ca", "secret:tls:data.ca", "Replace", "SourceMissing", age, ""},
			},
		},
		{
			name:        "single object",
			object:      &list.Items[2],
			wantRV:      list.Items[2].ResourceVersion,
			wantHeaders: true,
			wantRows:    [][]interface{}{{"Deployment.api.spec.template", "Deployment/api", "spec.template", "deployments.v1.apps:other/base:spec.template", "Merge", "Refused", age, ""}},
		},
		{
			name:     "no headers",
			object:   &list.Items[1],
			options:  &metav1.TableOptions{NoHeaders: true},
			wantRV:   list.Items[1].ResourceVersion,
			wantRows: [][]interface{}{{"ConfigMap.web.data.mode", "ConfigMap/web", "data.mode", "json literal", "Replace", "Applied", age, ""}},
		},
		{
			name:        "bookmark",
			object:      &courier.FieldCopy{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}},
			wantRV:      "9",
			wantHeaders: true,
			wantRows:    [][]interface{}{{"", "", "", "", "", "", "<unknown>", ""}},
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := r.ConvertToTable(ctxIn(""), tc.object, tc.options)
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			if tbl.ResourceVersion != tc.wantRV {
				t.Errorf("table resourceVersion %q, want %q", tbl.ResourceVersion, tc.wantRV)
			}
			var cols []string
			for i, c := range tbl.ColumnDefinitions {
				cols = append(cols, c.Name)
				wantPriority := int32(0)
				if c.Name == "Message" {
					wantPriority = 1
				}
				if c.Priority != wantPriority || c.Description == "" || c.Type != "string" {
					t.Errorf("column %d = %+v, want priority %d, type string and a description", i, c, wantPriority)
				}
			}
			if tc.wantHeaders && !reflect.DeepEqual(cols, wantColumns) {
				t.Errorf("columns %v, want %v", cols, wantColumns)
			}
			if !tc.wantHeaders && len(cols) != 0 {
				t.Errorf("columns %v with noHeaders", cols)
			}
			if len(tbl.Rows) != len(tc.wantRows) {
				t.Fatalf("%d rows, want %d", len(tbl.Rows), len(tc.wantRows))
			}
			for i, row := range tbl.Rows {
				if !reflect.DeepEqual(row.Cells, tc.wantRows[i]) {
					t.Errorf("row %d cells\n got %q\nwant %q", i, row.Cells, tc.wantRows[i])
				}
				if o, ok := row.Object.Object.(*courier.FieldCopy); !ok || o.Name != tc.wantRows[i][0] {
					t.Errorf("row %d object %#v, want the FieldCopy %v", i, row.Object.Object, tc.wantRows[i][0])
				}
			}
		})
	}
	if _, err := r.ConvertToTable(ctxIn(""), &courier.DownstreamCopyList{}, nil); err == nil {
		t.Error("a foreign object: no error")
	}
}

func TestNames(t *testing.T) {
	r, _ := newTestREST(t)
	if _, ok := r.New().(*courier.FieldCopy); !ok {
		t.Errorf("New() = %T", r.New())
	}
	if _, ok := r.NewList().(*courier.FieldCopyList); !ok {
		t.Errorf("NewList() = %T", r.NewList())
	}
	if !r.NamespaceScoped() || r.GetSingularName() != "fieldcopy" || r.Kind() != "FieldCopy" {
		t.Errorf("namespaced=%v singular=%q kind=%q", r.NamespaceScoped(), r.GetSingularName(), r.Kind())
	}
	if len(r.ShortNames()) != 0 {
		t.Errorf("short names %q, want none", r.ShortNames())
	}
	if !reflect.DeepEqual(r.Categories(), []string{"courier"}) {
		t.Errorf("categories %q, want [courier]", r.Categories())
	}
}

func TestSelectableFields(t *testing.T) {
	var got []string
	for k := range selectableFields(fixtures()[0]) {
		got = append(got, k)
	}
	want := append([]string(nil), v1alpha1.FieldCopyFieldLabels...)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("selectable fields %v, scheme field labels %v", got, want)
	}
}
