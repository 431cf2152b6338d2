package clusterstatus

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// tenRows are a pushed Cluster's ten rows, all Synced from rv.
func tenRows(rv string) map[string]Entry {
	rows := map[string]Entry{}
	for i := range 10 {
		t := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		rows[fmt.Sprintf("app.edge1.secret.s%d", i)] = EntryOf(copycontract.Status{Phase: courier.CopyPhaseSynced,
			Message: "copied", SyncedResourceVersion: rv, LastSyncTime: &t})
	}
	return rows
}

func TestPublishWritesOnChangeOnly(t *testing.T) {
	f := newFixture(t, nil)
	f.store.Publish(edge1, tenRows("1"), nil)
	r := f.waitReport("the first publish", func(r *Report) bool { return len(r.Rows) == 10 })
	if !r.Heartbeat.LastHeard.IsZero() {
		t.Errorf("a pushed Cluster's object has a heartbeat: %+v", r.Heartbeat)
	}
	if _, ok := f.object().Data[HeartbeatKey]; ok {
		t.Error("a pushed Cluster's object holds the heartbeat key")
	}
	if n := f.writes.Load(); n != 1 {
		t.Fatalf("%d writes for the first publish, want 1", n)
	}
	// The first write's queue goes once its writer is done, which can be
	// after the informer shows the object: wait for it, or the check
	// below would see the first write's queue.
	f.waitQueueGone()

	// The same statuses again (a resync, a new holder's first pass, an
	// hour later): no write, and not even a batch queued.
	later := tenRows("1")
	for row, e := range later {
		t := metav1.NewTime(e.LastSyncTime.Add(time.Hour))
		e.LastSyncTime = &t
		later[row] = e
	}
	f.store.Publish(edge1, later, nil)
	f.store.wmu.Lock()
	queued := f.store.queues[edge1] != nil
	f.store.wmu.Unlock()
	if queued {
		t.Error("publishing what is upstream queued a write")
	}

	// Every source changed: ten rows change, one write.
	f.store.Publish(edge1, tenRows("2"), nil)
	f.waitReport("the second publish", func(r *Report) bool { return r.Rows["app.edge1.secret.s9"].SyncedResourceVersion == "2" })
	if n := f.writes.Load(); n != 2 {
		t.Errorf("%d writes after a change of every row, want 2 (one per change of the Cluster)", n)
	}

	// A row gone: not worth a write of its own; it goes with the next change.
	rows := tenRows("2")
	delete(rows, "app.edge1.secret.s0")
	f.store.Publish(edge1, rows, nil)
	rows = tenRows("3")
	delete(rows, "app.edge1.secret.s0")
	f.store.Publish(edge1, rows, nil)
	r = f.waitReport("the third publish", func(r *Report) bool { return r.Rows["app.edge1.secret.s9"].SyncedResourceVersion == "3" })
	if _, ok := r.Rows["app.edge1.secret.s0"]; ok || len(r.Rows) != 9 {
		t.Errorf("the gone row stayed: %d rows", len(r.Rows))
	}
	if n := f.writes.Load(); n != 3 {
		t.Errorf("%d writes, want 3", n)
	}
}

func TestPublishReplacesAnAgentsReport(t *testing.T) {
	f := newFixture(t, nil)
	f.record("app.edge1.secret.s0", courier.CopyPhaseSynced, 30*time.Second)
	f.waitReport("the agent's report", func(r *Report) bool { return !r.Heartbeat.LastHeard.IsZero() })
	// The Cluster is pushed now, and its deliverer found the same status.
	e := Entry{Phase: courier.CopyPhaseSynced, Message: "m"}
	f.store.Publish(edge1, map[string]Entry{"app.edge1.secret.s0": e}, nil)
	waitFor(t, "the agent's heartbeat gone from a pushed Cluster's object", func() bool {
		_, ok := f.object().Data[HeartbeatKey]
		return !ok
	})
}

func TestEntryOfCutsLongMessages(t *testing.T) {
	long := make([]byte, 2*MaxMessageBytes)
	for i := range long {
		long[i] = 'x'
	}
	e := EntryOf(copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: string(long)})
	if len(e.Message) > MaxMessageBytes || e.Phase != courier.CopyPhaseForbidden {
		t.Errorf("message of %d bytes, phase %s", len(e.Message), e.Phase)
	}
}

// waitQueueGone waits until edge1 has no write queue: its writer has
// finished.
func (f *fixture) waitQueueGone() {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.store.wmu.Lock()
		defer f.store.wmu.Unlock()
		return f.store.queues[edge1] == nil, nil
	})
	if err != nil {
		f.t.Fatal("edge1's write queue is still there after 10s")
	}
}
