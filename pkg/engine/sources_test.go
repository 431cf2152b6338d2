package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// Workers that miss the cache for the same source at the same
// resourceVersion together share one GET.
func TestSourceCacheSharesReads(t *testing.T) {
	up := fake.NewClientset(srcSecret("db", "7"))
	entered := make(chan struct{})
	release := make(chan struct{})
	var gets atomic.Int32
	up.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if gets.Add(1) == 1 {
			close(entered)
			<-release
		}
		return false, nil, nil
	})
	s := newSourceCache(UpstreamSources{Client: up})
	key := sourceKey{"Secret", fleetNS, "db"}
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	first := make(chan struct{})
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				<-first // the others ask while the first GET is in flight
			}
			_, err := s.get(context.Background(), key, "7", fleetNS+"/row")
			errs <- err
		}()
		if i == 0 {
			<-entered
			close(first)
		}
	}
	// Let the others reach the in-flight read before it returns: each
	// either joins it or, arriving later, finds the object cached.
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := actionStrings(up.Actions()); len(got) != 1 {
		t.Errorf("upstream requests %q, want one GET", got)
	}
}
