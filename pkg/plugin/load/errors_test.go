package load

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestExplain: each API error a user meets reads as what to do.
func TestExplain(t *testing.T) {
	gr := schema.GroupResource{Group: "courier.dev", Resource: "downstreamcopysummaries"}
	for _, tc := range []struct {
		name     string
		err      error
		verb     string
		obj      string
		want     []string
		notFound bool
	}{
		{"owner missing", apierrors.NewNotFound(gr, "nope"), "get", "nope", []string{`downstreamcopysummaries "nope" in namespace "fleet-default"`}, true},
		{"API not served (get)", apierrors.NewGenericServerResponse(404, "get", gr, "nope", "404 page not found", 0, true), "get", "nope",
			[]string{"does not serve downstreamcopysummaries.courier.dev", "no APIService v1alpha1.courier.dev", "helm install courier", "docs/install.md"}, false},
		{"API not served (list)", apierrors.NewGenericServerResponse(404, "list", gr, "", "404 page not found", 0, true), "list", "",
			[]string{"does not serve downstreamcopysummaries.courier.dev"}, false},
		{"APIService not Available", apierrors.NewServiceUnavailable("service unavailable"), "list", "",
			[]string{"not Available", "kubectl get apiservice v1alpha1.courier.dev"}, false},
		{"forbidden", apierrors.NewForbidden(gr, "", errors.New(`User "alice" cannot list resource "downstreamcopysummaries"`)), "list", "",
			[]string{`forbidden: you may not list downstreamcopysummaries.courier.dev in namespace "fleet-default"`, `User "alice"`, "aggregated-roles.yaml"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Explain(tc.err, tc.verb, "downstreamcopysummaries", "fleet-default", tc.obj)
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			if errors.Is(got, ErrNotFound) != tc.notFound {
				t.Errorf("errors.Is(ErrNotFound) = %v", !tc.notFound)
			}
		})
	}
}

func TestParseOwner(t *testing.T) {
	for in, want := range map[string]string{"app": `HelmOp "app"`, "bundle:web": `Bundle "web"`} {
		if o, err := ParseOwner(in); err != nil || o.String() != want {
			t.Errorf("ParseOwner(%q) = %v, %v", in, o, err)
		}
	}
	for _, bad := range []string{"", "bundle:", "a/b", "x:y"} {
		if _, err := ParseOwner(bad); err == nil {
			t.Errorf("ParseOwner(%q) accepted", bad)
		}
	}
}
