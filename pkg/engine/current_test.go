package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/downstream"
)

// A copy found current is remembered at its resourceVersion: the next pass
// over it neither reads its source nor writes. Anything that could change
// the answer is judged afresh: the copy edited downstream (which gives it
// a new resourceVersion), a new version of the source, the row's
// keepResources.
//
// The source cache is emptied before the second pass, so a pass that
// judges the copy again has to read the source upstream, and one that
// trusts what it remembered reads nothing: the upstream reads tell the
// two apart, and the cases that must write are the positive control.
func TestCurrentCopiesAreRemembered(t *testing.T) {
	edited := func(s *corev1.Secret) { s.ResourceVersion, s.Data["password"] = "101", []byte("edited") }
	cases := []struct {
		name string
		// change is applied between the two passes; it returns the row the
		// second pass is given.
		change   func(env *testEnv, r *courier.DownstreamCopy) *courier.DownstreamCopy
		wantUp   []string
		wantDown []string
	}{
		{
			name:     "nothing changed: no read, no write",
			change:   func(_ *testEnv, r *courier.DownstreamCopy) *courier.DownstreamCopy { return r },
			wantUp:   []string{},
			wantDown: []string{},
		},
		{
			name: "copy edited downstream: repaired",
			change: func(env *testEnv, r *courier.DownstreamCopy) *courier.DownstreamCopy {
				cur := secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1"), edited)
				env.down.cache(cur)
				if err := env.down.kube.Tracker().Update(secretsGVR, cur, targetNS); err != nil {
					t.Fatal(err)
				}
				return r
			},
			wantUp:   []string{"get secrets fleet-default/db"},
			wantDown: []string{saLookup, "update secrets apps/db"},
		},
		{
			name: "source changed: updated",
			change: func(env *testEnv, r *courier.DownstreamCopy) *courier.DownstreamCopy {
				if err := env.upstream.Tracker().Update(secretsGVR, withSecretData(srcSecret("db", "8"), canary+"-v2"), fleetNS); err != nil {
					t.Fatal(err)
				}
				return row("Secret", "db", "8", "")
			},
			wantUp:   []string{"get secrets fleet-default/db"},
			wantDown: []string{saLookup, "update secrets apps/db"},
		},
		{
			name: "keepResources set: updated",
			change: func(_ *testEnv, r *courier.DownstreamCopy) *courier.DownstreamCopy {
				kept := r.DeepCopy()
				kept.Spec.KeepResources = true
				return kept
			},
			wantUp:   []string{"get secrets fleet-default/db"},
			wantDown: []string{saLookup, "update secrets apps/db"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := srcSecret("db", "7")
			down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")))
			env := newEnv(t, down, db)
			r := rowOf(db)
			if err := env.reconcile(r); err != nil {
				t.Fatalf("first pass: %v", err)
			}
			if w := writes(down.kube.Actions()); len(w) != 0 {
				t.Fatalf("first pass wrote %q to a current copy", actionStrings(w))
			}

			r = tc.change(env, r)
			env.e.sources.forget(sourceKey{"Secret", fleetNS, "db"})
			env.upstream.ClearActions()
			down.kube.ClearActions()
			if err := env.reconcile(r); err != nil {
				t.Fatalf("second pass: %v", err)
			}

			checkActions(t, "upstream", env.upActions(), tc.wantUp)
			checkActions(t, "downstream", env.downActions(), tc.wantDown)
			if st := env.mustStatus(r); st.Phase != courier.CopyPhaseSynced || st.SyncedResourceVersion != r.Spec.Source.ResourceVersion {
				t.Errorf("row after the second pass = %+v, want Synced at %s", st, r.Spec.Source.ResourceVersion)
			}
		})
	}
}

// currentCopies answers for exactly what it was told: one row, at one
// copy and source version, with one client.
func TestCurrentCopiesKeys(t *testing.T) {
	client, other := &downstream.Client{Key: clusterKey}, &downstream.Client{Key: clusterKey}
	base := desiredCopy{rowKey: "fleet-default/app.c1.secret.db", targetNS: "apps", sourceRV: "7"}
	with := func(edit func(*desiredCopy)) desiredCopy { c := base; edit(&c); return c }
	cases := []struct {
		name   string
		client *downstream.Client
		c      desiredCopy
		copyRV string
		want   bool
	}{
		{"same row, versions and client", client, base, "100", true},
		{"copy at another version", client, base, "101", false},
		{"source at another version", client, with(func(c *desiredCopy) { c.sourceRV = "8" }), "100", false},
		{"another target namespace", client, with(func(c *desiredCopy) { c.targetNS = "other" }), "100", false},
		{"keepResources changed", client, with(func(c *desiredCopy) { c.keep = true }), "100", false},
		{"another row", client, with(func(c *desiredCopy) { c.rowKey += "2" }), "100", false},
		{"a new client for the Cluster", other, base, "100", false},
		{"no source version", client, with(func(c *desiredCopy) { c.sourceRV = "" }), "100", false},
		{"no copy version", client, base, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newCurrentCopies()
			m.remember(client, base, "100")
			if got := m.holds(tc.client, tc.c, tc.copyRV); got != tc.want {
				t.Errorf("holds = %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("retain keeps wanted rows, forget drops the Cluster", func(t *testing.T) {
		m := newCurrentCopies()
		gone := with(func(c *desiredCopy) { c.rowKey = "fleet-default/app.c1.secret.gone" })
		m.remember(client, base, "100")
		m.remember(client, gone, "100")
		m.retain(clusterKey, []desiredCopy{base})
		if !m.holds(client, base, "100") || m.holds(client, gone, "100") {
			t.Errorf("after retain: wanted row held %v (want true), removed row held %v (want false)",
				m.holds(client, base, "100"), m.holds(client, gone, "100"))
		}
		m.forget(clusterKey)
		if m.holds(client, base, "100") {
			t.Error("a forgotten Cluster's copy is still held")
		}
	})
}

// A copy Courier has just written is current as written: the pass after
// the write finds it in the informer at the resourceVersion the write
// returned and reads nothing upstream to judge it (the source cache is
// emptied first, as above, so any judging would show as a read).
func TestWrittenCopyIsRemembered(t *testing.T) {
	down := newFakeCluster(true, targetNamespace, secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1")))
	env := newEnv(t, down, withSecretData(srcSecret("db", "8"), canary+"-v2"))
	r := row("Secret", "db", "8", "")
	if err := env.reconcile(r); err != nil {
		t.Fatalf("first pass: %v", err)
	}
	checkActions(t, "first pass downstream", env.downActions(), []string{saLookup, "update secrets apps/db"})
	written, ok := down.secret(targetNS, "db")
	if !ok {
		t.Fatal("the copy is gone after the update")
	}
	down.cache(written) // the informer's view of the write

	env.e.sources.forget(sourceKey{"Secret", fleetNS, "db"})
	env.upstream.ClearActions()
	down.kube.ClearActions()
	if err := env.reconcile(r); err != nil {
		t.Fatalf("second pass: %v", err)
	}
	checkActions(t, "second pass upstream", env.upActions(), []string{})
	checkActions(t, "second pass downstream", env.downActions(), []string{})
	if st := env.mustStatus(r); st.Phase != courier.CopyPhaseSynced || st.SyncedResourceVersion != "8" {
		t.Errorf("row after the second pass = %+v, want Synced at 8", st)
	}
}
