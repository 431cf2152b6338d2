package engine

import (
	"errors"
	"maps"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// The pass scopes alone: a pass covers only the rows whose sources changed
// when nothing else happened since the last one; anything else recorded
// makes it whole.
func TestPassScope(t *testing.T) {
	type step struct {
		whole  bool
		forget bool
		rows   []string
	}
	source := func(rows ...string) step { return step{rows: rows} }
	whole := step{whole: true}
	forget := step{forget: true}
	cases := []struct {
		name  string
		steps []step
		want  []string // nil: a whole pass
	}{
		{"nothing recorded", nil, nil},
		{"one source", []step{source("r1")}, []string{"r1"}},
		{"two sources, one twice", []step{source("r1"), source("r2", "r1")}, []string{"r1", "r2"}},
		{"a source, then something else", []step{source("r1"), whole}, nil},
		{"something else, then a source", []step{whole, source("r1")}, nil},
		{"the Cluster forgotten, then a source", []step{whole, forget, source("r1")}, []string{"r1"}},
		{"a source, then the Cluster forgotten", []step{source("r1"), forget}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPassScopes()
			p.oweWhole("fleet-default/other") // another Cluster's scope is its own
			for _, s := range tc.steps {
				switch {
				case s.whole:
					p.oweWhole(clusterKey)
				case s.forget:
					p.forget(clusterKey)
				default:
					p.oweRows(clusterKey, s.rows...)
				}
			}

			got := p.take(clusterKey)
			if (got == nil) != (tc.want == nil) || !slices.Equal(slices.Sorted(maps.Keys(got)), tc.want) {
				t.Errorf("scope %v, want %v (nil: whole)", slices.Sorted(maps.Keys(got)), tc.want)
			}
			if again := p.take(clusterKey); again != nil {
				t.Errorf("a second take found %v: taking a scope must clear it", again)
			}
			if _, ok := p.scopes["fleet-default/other"]; !ok {
				t.Error("another Cluster's scope was taken")
			}
		})
	}
}

// passCounts reads courier_cluster_passes_total.
func passCounts(t *testing.T) (whole, sources float64) {
	t.Helper()
	w, err := testutil.GetCounterMetricValue(passesTotal.WithLabelValues("whole"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := testutil.GetCounterMetricValue(passesTotal.WithLabelValues("sources"))
	if err != nil {
		t.Fatal(err)
	}
	return w, s
}

// scopeEnv is cluster c1 holding current copies of db (rv 7) and settings
// (rv 9) after a whole pass, plus a copy of "old" that nothing wants,
// which appeared afterwards without an event (its informer event would
// ask for a whole pass itself): only a whole pass's sweep removes it, so
// it tells the two kinds of pass apart.
func scopeEnv(t *testing.T) (*testEnv, []*courier.DownstreamCopy) {
	t.Helper()
	db, settings := srcSecret("db", "7"), srcConfigMap("settings", "9")
	down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")),
		configMapCopy(settings, targetNS, owner(appOp, "c1")))
	env := newEnv(t, down, db, settings)
	rows := []*courier.DownstreamCopy{rowOf(db), rowOf(settings)}
	if err := env.reconcile(rows...); err != nil {
		t.Fatalf("first pass: %v", err)
	}
	env.e.clients.passEnded(env.ds.client) // as the first pass did; reconcile is direct
	stale := secretCopy(srcSecret("old", "3"), targetNS, owner(appOp, "c1"))
	if err := down.kube.Tracker().Add(stale); err != nil {
		t.Fatal(err)
	}
	down.cache(stale)
	if err := env.upstream.Tracker().Update(secretsGVR, srcSecret("db", "8"), fleetNS); err != nil {
		t.Fatal(err)
	}
	down.kube.ClearActions()
	return env, rows
}

func TestSourcePassCoversOnlyItsRows(t *testing.T) {
	db8 := row("Secret", "db", "8", courier.CopyPhaseSynced)
	cases := []struct {
		name string
		// before is what happens between the first pass and the one checked.
		before    func(env *testEnv, rows []*courier.DownstreamCopy)
		wantWhole bool
	}{
		{name: "a source changed", wantWhole: false, before: func(env *testEnv, _ []*courier.DownstreamCopy) {
			mustUpdateDesired(env, db8)
		}},
		{name: "a source changed, then the Cluster", wantWhole: true, before: func(env *testEnv, _ []*courier.DownstreamCopy) {
			mustUpdateDesired(env, db8)
			env.e.ClusterChanged(clusterKey)
		}},
		{name: "the Cluster changed, then a source", wantWhole: true, before: func(env *testEnv, _ []*courier.DownstreamCopy) {
			env.e.ClusterChanged(clusterKey)
			mustUpdateDesired(env, db8)
		}},
		{name: "the HelmOp's rows handed over again", wantWhole: true, before: func(env *testEnv, rows []*courier.DownstreamCopy) {
			env.e.SetDesired(appOp, []*courier.DownstreamCopy{db8, rows[1]})
		}},
		{name: "a source changed, and the Cluster has a new client", wantWhole: true, before: func(env *testEnv, _ []*courier.DownstreamCopy) {
			env.ds.client = env.down.client()
			env.e.clients.legacySwept(clusterKey, env.ds.client)
			mustUpdateDesired(env, db8)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, rows := scopeEnv(t)
			tc.before(env, rows)
			if queued := drain(env.e.queue); !slices.Equal(queued, []string{clusterKey}) {
				t.Fatalf("queued %q, want c1", queued)
			}
			whole0, sources0 := passCounts(t)

			if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
				t.Fatalf("pass: %v", err)
			}

			whole1, sources1 := passCounts(t)
			wantWhole, wantSources := 0.0, 1.0
			want := []string{"update secrets apps/db"}
			if tc.wantWhole {
				wantWhole, wantSources = 1, 0
				want = append(want, "delete secrets apps/old")
			}
			if whole1-whole0 != wantWhole || sources1-sources0 != wantSources {
				t.Errorf("passes: whole +%v, sources +%v; want +%v, +%v", whole1-whole0, sources1-sources0, wantWhole, wantSources)
			}
			checkActions(t, "writes", actionStrings(writes(env.down.kube.Actions())), want)
			checkStatus(t, "db row", env.mustStatus(db8), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "8", LastSyncTime: syncedAt, Message: syncedMessage})
			checkStatus(t, "settings row, not in the pass", env.mustStatus(rows[1]), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "9", LastSyncTime: syncedAt, Message: syncedMessage})
		})
	}
}

// A pass that fails is retried whole, even when only sources changed
// before the retry runs.
func TestFailedPassIsRetriedWhole(t *testing.T) {
	env, _ := scopeEnv(t)
	refused := true
	env.down.kube.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return refused, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db", errors.New("denied"))
	})
	mustUpdateDesired(env, row("Secret", "db", "8", courier.CopyPhaseSynced))
	whole0, sources0 := passCounts(t)
	env.e.processNext(env.ctx)
	if n := env.e.queue.NumRequeues(clusterKey); n != 1 {
		t.Fatalf("requeues after a refused write = %d, want 1", n)
	}
	if _, ok := env.down.secret(targetNS, "old"); !ok {
		t.Fatal("the sources pass removed the copy nothing wants: it was not a sources pass")
	}

	refused = false
	env.down.kube.ClearActions()
	if err := env.upstream.Tracker().Update(configMapsGVR, srcConfigMap("settings", "10"), fleetNS); err != nil {
		t.Fatal(err)
	}
	mustUpdateDesired(env, row("ConfigMap", "settings", "10", courier.CopyPhaseSynced))
	if queued := drain(env.e.queue); !slices.Equal(queued, []string{clusterKey}) {
		t.Fatalf("queued %q, want c1", queued)
	}
	if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
		t.Fatalf("retry: %v", err)
	}
	whole1, sources1 := passCounts(t)
	if whole1-whole0 != 1 || sources1-sources0 != 1 {
		t.Errorf("passes: whole +%v, sources +%v; want +1 each", whole1-whole0, sources1-sources0)
	}
	checkActions(t, "retry's writes", actionStrings(writes(env.down.kube.Actions())),
		[]string{"update configmaps apps/settings", "update secrets apps/db", "delete secrets apps/old"})
}

func mustUpdateDesired(env *testEnv, rows ...*courier.DownstreamCopy) {
	env.t.Helper()
	if !env.e.UpdateDesired(appOp, rows) {
		env.t.Fatalf("UpdateDesired refused %d rows", len(rows))
	}
}
