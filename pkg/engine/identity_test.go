package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
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
	// The answer past its TTL is asked again in the background
	// (TestFallbackAnswerRefreshedInTheBackground): wait for that request.
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return lookups() >= 2, nil
	})
	if got := lookups(); err != nil || got != 2 {
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

// An answer about the fallback ServiceAccount older than fallbackTTL is
// used once more by the pass that finds it, which does not wait, while one
// request asks again in the background; the pass after that has the new
// answer. Two passes during the refresh start one request, not two.
func TestFallbackAnswerRefreshedInTheBackground(t *testing.T) {
	down := newFakeCluster(true)
	env := newEnv(t, down)
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	env.e.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	asked := make(chan struct{}, 10)
	release := make(chan struct{})
	blocking := false
	down.kube.PrependReactor("get", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		block := blocking
		mu.Unlock()
		asked <- struct{}{}
		if block {
			<-release
		}
		return false, nil, nil // the tracker answers: NotFound, or the SA once created
	})
	cl := down.client()
	lookup := func() bool {
		t.Helper()
		exists, err := env.e.fallbackLookup(env.ctx, cl)()
		if err != nil {
			t.Fatal(err)
		}
		return exists
	}

	if lookup() || len(asked) != 1 {
		t.Fatalf("first lookup: want false after one request, got %d requests", len(asked))
	}
	<-asked
	if lookup() || len(asked) != 0 {
		t.Fatalf("within fallbackTTL the answer must be reused, got %d requests", len(asked))
	}

	// The ServiceAccount appears; the answer grows old; the cluster is slow.
	if _, err := down.kube.CoreV1().ServiceAccounts("cattle-fleet-system").Create(env.ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-fleet-system", Name: FallbackServiceAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(fallbackTTL)
	blocking = true
	mu.Unlock()
	done := make(chan bool, 1)
	go func() { done <- lookup() }()
	<-asked // the request has started, and is held until release
	select {
	case exists := <-done:
		if exists {
			t.Fatal("the pass that finds the old answer must use it (false)")
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the pass that found the old answer waited for the request that asks again")
	}
	if lookup() {
		t.Fatal("a pass during the refresh must use the old answer")
	}
	close(release)
	err := wait.PollUntilContextTimeout(env.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return lookup(), nil
	})
	if err != nil {
		t.Fatal("the refreshed answer (true) never arrived")
	}
	if n := len(asked); n != 0 {
		t.Errorf("%d more requests during and after the refresh, want none", n)
	}
}
