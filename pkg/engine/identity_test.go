package engine

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
