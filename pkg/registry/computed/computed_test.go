package computed

import (
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/registry/memstore"
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
