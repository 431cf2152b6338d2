package engine

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The source cache reads a listed source once per resourceVersion, and
// holds only the sources still listed.
func TestSourceCache(t *testing.T) {
	ctx := context.Background()
	up := fake.NewClientset(srcSecret("db", "7"), srcConfigMap("settings", "9"))
	s := newSourceCache(UpstreamSources{Client: up})
	db := sourceKey{"Secret", fleetNS, "db"}
	settings := sourceKey{"ConfigMap", fleetNS, "settings"}
	missing := sourceKey{"Secret", fleetNS, "missing"}

	steps := []struct {
		name     string
		before   func()
		key      sourceKey
		rv       string
		wantRV   string // "" : NotFound
		wantGets []string
	}{
		{name: "first read", key: db, rv: "7", wantRV: "7",
			wantGets: []string{"get secrets fleet-default/db"}},
		{name: "same resourceVersion: from the cache", key: db, rv: "7", wantRV: "7"},
		{name: "ConfigMap", key: settings, rv: "9", wantRV: "9",
			wantGets: []string{"get configmaps fleet-default/settings"}},
		{name: "newer resourceVersion: read again", key: db, rv: "8", wantRV: "8",
			before: func() {
				if _, err := up.CoreV1().Secrets(fleetNS).Update(ctx, srcSecret("db", "8"), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantGets: []string{"get secrets fleet-default/db"}},
		{name: "no longer listed: dropped", key: settings, rv: "9", wantRV: "9",
			before:   func() { s.forget(settings) },
			wantGets: []string{"get configmaps fleet-default/settings"}},
		{name: "still listed: kept", key: db, rv: "8", wantRV: "8"},
		{name: "missing source", key: missing, rv: "", wantGets: []string{"get secrets fleet-default/missing"}},
		{name: "missing source is not cached", key: missing, rv: "", wantGets: []string{"get secrets fleet-default/missing"}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		up.ClearActions()
		obj, err := s.get(ctx, st.key, st.rv, "")
		switch {
		case st.wantRV == "" && !apierrors.IsNotFound(err):
			t.Errorf("%s: err = %v, want NotFound", st.name, err)
		case st.wantRV != "" && err != nil:
			t.Errorf("%s: %v", st.name, err)
		case st.wantRV != "":
			if m, _ := metaOf(obj); m.GetResourceVersion() != st.wantRV {
				t.Errorf("%s: got resourceVersion %s, want %s", st.name, m.GetResourceVersion(), st.wantRV)
			}
		}
		if got := actionStrings(up.Actions()); !slices.Equal(got, st.wantGets) {
			t.Errorf("%s: upstream requests %q, want %q", st.name, got, st.wantGets)
		}
	}
}
