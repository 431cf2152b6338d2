package engine

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// The budget passes what client-go's spam filter would: a burst, then one
// per interval, per HelmOp; a HelmOp without rows starts over.
func TestEventBudget(t *testing.T) {
	b := newEventBudget()
	allowed := func(op types.NamespacedName, at time.Time, n int) int {
		got := 0
		for range n {
			if b.allow(op, at) {
				got++
			}
		}
		return got
	}
	if got := allowed(appOp, fixedNow, 100); got != copiedEventBurst {
		t.Errorf("%d of 100 Events at once allowed, want the burst of %d", got, copiedEventBurst)
	}
	if got := allowed(otherOp, fixedNow, 1); got != 1 {
		t.Errorf("another HelmOp's first Event refused: budgets are per HelmOp")
	}
	if got := allowed(appOp, fixedNow.Add(copiedEventInterval-time.Second), 1); got != 0 {
		t.Errorf("an Event allowed %s after the burst, before one interval passed", copiedEventInterval-time.Second)
	}
	if got := allowed(appOp, fixedNow.Add(copiedEventInterval), 5); got != 1 {
		t.Errorf("%d Events allowed an interval after the burst, want 1", got)
	}
	b.forget(appOp)
	if got := allowed(appOp, fixedNow.Add(copiedEventInterval), 100); got != copiedEventBurst {
		t.Errorf("%d Events allowed after forget, want a new burst of %d", got, copiedEventBurst)
	}
}

// Past its budget a HelmOp's writes record no Copied Event; its problems
// still record Warnings, and once the interval has passed a write records
// one again.
func TestCopiedEventsPastTheBudget(t *testing.T) {
	down := newFakeCluster(true, targetNamespace, unmanagedSecret(targetNS, "taken"))
	var sources []runtime.Object
	for i := range 3 {
		sources = append(sources, srcSecret(fmt.Sprintf("s%d", i), "7"))
	}
	sources = append(sources, srcSecret("taken", "7"))
	env := newEnv(t, down, sources...)
	for range copiedEventBurst {
		env.e.copied.allow(appOp, fixedNow) // spent by earlier writes
	}
	rows := []*courier.DownstreamCopy{row("Secret", "s0", "7", ""), row("Secret", "taken", "7", "")}
	if err := env.reconcile(rows...); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if st := env.mustStatus(rows[0]); st.Phase != courier.CopyPhaseSynced {
		t.Fatalf("row s0 = %+v, want Synced (written)", st)
	}
	checkActions(t, "events past the budget", env.takeEvents(), []string{
		"Warning Conflict Secret apps/taken exists in cluster c1 and is not managed by Courier; it is left unchanged"})

	env.e.now = func() time.Time { return fixedNow.Add(copiedEventInterval) }
	rows = append(rows, row("Secret", "s1", "7", ""), row("Secret", "s2", "7", ""))
	if err := env.reconcile(rows...); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	checkActions(t, "events an interval later", env.takeEvents(), []string{
		"Normal Copied Secret s1 copied to apps/s1 in cluster c1"})
}
