package engine

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-dev/courier/pkg/apis/courier"
)

// A new client's first pass asks what it will need besides its copies --
// whether the fallback ServiceAccount exists, and the copies written before
// the cluster-hash label -- while its informers sync, not after. The
// fake's informers report synced only once those three requests have been
// made: a pass that made them only after the wait would find the
// informers never synced (and wait out SyncWait first).
func TestFirstPassReadsWhileInformersSync(t *testing.T) {
	const legacySecrets = "list secrets !courier.dev/cluster-hash,courier.dev/managed-by=courier"
	const legacyConfigMaps = "list configmaps !courier.dev/cluster-hash,courier.dev/managed-by=courier"
	down := newFakeCluster(false, targetNamespace)
	env := newEnv(t, down, srcSecret("db", "7"))
	env.e.cfg.SyncWait = 10 * time.Second // a bound for a failing run; a passing one never waits that long
	env.e.clients.forget(clusterKey)      // a new client: the unlabelled copies are still to be looked for
	var sawSynced atomic.Bool
	env.ds.client.HasSynced = func() bool {
		if sawSynced.Load() {
			return true
		}
		actions := actionStrings(down.kube.Actions())
		if slices.Contains(actions, saLookup) && slices.Contains(actions, legacySecrets) && slices.Contains(actions, legacyConfigMaps) {
			sawSynced.Store(true)
			return true
		}
		return false
	}

	if err := env.reconcile(row("Secret", "db", "7", courier.CopyPhasePending)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if !sawSynced.Load() {
		t.Fatalf("the informers never synced: the pass's reads were not made while it waited for them; requests %q", env.downActions())
	}
	actions := env.downActions()
	first := slices.Index(actions, "create secrets apps/db")
	if first < 0 {
		t.Fatalf("the copy was not created: %q", actions)
	}
	for _, read := range []string{saLookup, legacySecrets, legacyConfigMaps} {
		if i := slices.Index(actions, read); i < 0 || i > first {
			t.Errorf("%q was not made before the copy's create: %q", read, actions)
		}
		if n := count(actions, read); n != 1 {
			t.Errorf("%q made %d times, want once (the sweep uses the early answer): %q", read, n, actions)
		}
	}
	if got := env.mustStatus(row("Secret", "db", "7", courier.CopyPhasePending)).Phase; got != courier.CopyPhaseSynced {
		t.Errorf("phase %s, want Synced", got)
	}

}

// A pass over a synced client starts no read it may not need: with
// nothing to write, the fallback ServiceAccount is not asked.
func TestSyncedPassStartsNoRead(t *testing.T) {
	db := srcSecret("db", "7")
	down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")))
	env := newEnv(t, down, db)
	env.e.cfg.SyncWait = 10 * time.Second
	if err := env.reconcile(rowOf(db)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	checkActions(t, "downstream", env.downActions(), []string{})
	// Positive control: the same pass with the copy missing asks.
	down.kube.ClearActions()
	if err := down.kube.Tracker().Delete(secretsGVR, targetNS, "db"); err != nil {
		t.Fatal(err)
	}
	_ = down.secrets.Delete(secretCopy(db, targetNS, owner(appOp, "c1")))
	if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	checkContains(t, env.downActions(), saLookup, "create secrets apps/db")
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}
