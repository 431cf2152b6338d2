package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// The fallback ServiceAccount is looked up at most once per fallbackTTL per
// cluster, however many write passes there are; after that it is asked
// again, so one created later is found.
func TestFallbackLookupIsReused(t *testing.T) {
	env := newEnv(t, newFakeCluster(false), srcSecret("db", "1"))
	now := fixedNow
	env.e.now = func() time.Time { return now }
	lookups := func() int {
		n := 0
		for _, a := range env.downActions() {
			if a == saLookup {
				n++
			}
		}
		return n
	}
	pass := func(rv string) {
		t.Helper()
		env.upstream.CoreV1().Secrets("fleet-default").Update(context.Background(), srcSecret("db", rv), metav1.UpdateOptions{})
		if err := env.reconcile(row("Secret", "db", rv, courier.CopyPhasePending)); err != nil {
			t.Fatal(err)
		}
	}
	pass("1")
	pass("2") // a second write within the TTL: no second lookup
	if got := lookups(); got != 1 {
		t.Fatalf("lookups after two write passes within the TTL = %d, want 1", got)
	}
	now = now.Add(fallbackTTL + time.Second)
	pass("3")
	if got := lookups(); got != 2 {
		t.Fatalf("lookups after the TTL = %d, want 2", got)
	}
}

// An update from a stale cached copy (409) is retried once from a live
// read in the same pass; an object that meanwhile is not Courier's is left
// alone and shows Conflict.
func TestStaleCachedCopyUpdate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		replaced  bool
		wantPhase courier.CopyPhase
		wantDown  []string
	}{
		{name: "ours: updated from the live copy", wantPhase: courier.CopyPhaseSynced,
			wantDown: []string{saLookup, "update secrets apps/db", "get secrets apps/db", "update secrets apps/db"}},
		{name: "replaced by someone else: left alone", replaced: true, wantPhase: courier.CopyPhaseConflict,
			wantDown: []string{saLookup, "update secrets apps/db", "get secrets apps/db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := srcSecret("db", "2")
			old := secretCopy(srcSecret("db", "1"), targetNS, owner(appOp, "c1"))
			live := old.DeepCopy()
			if tc.replaced {
				live = unmanagedSecret("apps", "db")
			}
			down := newFakeCluster(true, live)
			down.cache(old)
			conflicted := false
			down.kube.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				if conflicted {
					return false, nil, nil
				}
				conflicted = true
				return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), "db", errors.New("the object has been modified"))
			})
			env := newEnv(t, down, src)
			r := row("Secret", "db", "2", courier.CopyPhasePending)
			_ = env.reconcile(r)
			if st := env.mustStatus(r); st.Phase != tc.wantPhase {
				t.Errorf("phase = %s (%s), want %s", st.Phase, st.Message, tc.wantPhase)
			}
			checkActions(t, "downstream", env.downActions(), tc.wantDown)
		})
	}
}
