package clusterstatus

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/liveness"
)

const row = "app.edge1.secret.db"

// recordEntry records e for row of edge1.
func (f *fixture) recordEntry(e Entry, interval time.Duration) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.store.Record(ctx, edge1, row, e, interval); err != nil {
		f.t.Fatal(err)
	}
}

// waitEntry waits until the informer's report holds e for row.
func (f *fixture) waitEntry(e Entry) {
	f.t.Helper()
	f.waitReport("the reported entry", func(r *Report) bool { return sameStatus(r.Rows[row], e) && sameStatus(e, r.Rows[row]) })
}

func at(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// TestReportWrittenOnlyOnChange: the report object is written when a
// row's status changes, never for a heartbeat, and lastSyncTime alone
// only when it moves LastSyncTimeStep forward.
func TestReportWrittenOnlyOnChange(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	synced := Entry{Phase: courier.CopyPhaseSynced, Message: "m", SyncedResourceVersion: "7", LastSyncTime: at(t0)}
	with := func(f func(*Entry)) Entry { e := synced; f(&e); return e }
	cases := []struct {
		name  string
		next  Entry
		step  time.Duration // clock step before each of the reports
		count int           // how many reports of next
		write int32         // report writes they cost
	}{
		{"heartbeats with the same status", synced, 2 * time.Second, 30, 0},
		{"heartbeats over ten intervals of 30s", synced, 30 * time.Second, 10, 0},
		{"a changed phase, reported over and over", with(func(e *Entry) { e.Phase = courier.CopyPhaseConflict }), time.Second, 10, 1},
		{"a changed message", with(func(e *Entry) { e.Message = "other" }), time.Second, 5, 1},
		{"a new syncedResourceVersion", with(func(e *Entry) { e.SyncedResourceVersion = "8" }), time.Second, 5, 1},
		{"lastSyncTime a minute later (a restarted agent)", with(func(e *Entry) { e.LastSyncTime = at(t0.Add(time.Minute)) }), time.Second, 5, 0},
		{"lastSyncTime a step later", with(func(e *Entry) { e.LastSyncTime = at(t0.Add(LastSyncTimeStep)) }), time.Second, 5, 1},
		{"lastSyncTime earlier", with(func(e *Entry) { e.LastSyncTime = at(t0.Add(-time.Hour)) }), time.Second, 5, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.recordEntry(synced, 2*time.Second)
			f.waitEntry(synced)
			f.writes.Store(0)
			for range tc.count {
				f.clock.Step(tc.step)
				f.recordEntry(tc.next, 2*time.Second)
				if tc.write > 0 {
					f.waitEntry(tc.next)
				}
			}
			if n := f.writes.Load(); n != tc.write {
				t.Errorf("%d reports: %d writes of the report object, want %d", tc.count, n, tc.write)
			}
			if tc.write == 0 && f.digestWrites.Load() != 0 {
				t.Errorf("Record wrote a digest itself")
			}
		})
	}
}

// TestUnreachableDeadline: a Cluster turns Unreachable (its report's deadline
// passes) three intervals after the newest record any replica has, its
// own memory or another replica's digest; after a restart the digests
// keep it reachable.
func TestUnreachableDeadline(t *testing.T) {
	const iv = 2 * time.Second
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		digest  time.Duration // another replica heard it this long ago (0: none)
		heard   time.Duration // this replica heard it this long ago (0: never)
		overdue bool
	}{
		{"heard here 1s ago", 0, time.Second, false},
		{"heard here three intervals ago", 0, 3 * iv, true},
		{"heard here long ago, by another replica 1s ago", time.Second, 10 * iv, false},
		{"only another replica's digest, 5s ago (a restarted replica)", 5 * time.Second, 0, false},
		{"only another replica's digest, 6s ago", 6 * time.Second, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.clock.SetTime(now.Add(-time.Minute))
			f.recordEntry(Entry{Phase: courier.CopyPhaseSynced}, iv) // written a minute ago
			f.waitReport("the report", func(r *Report) bool { return len(r.Rows) == 1 })
			if tc.heard > 0 {
				f.clock.SetTime(now.Add(-tc.heard))
				f.live.Heard(edge1, iv)
			}
			f.clock.SetTime(now)
			f.digestWrites.Store(0)
			if tc.digest > 0 {
				f.otherReplicaHeard(now.Add(-tc.digest), iv)
				f.clock.SetTime(now)
			}
			r, _ := f.store.Report(edge1)
			if overdue := !now.Before(r.Deadline()); overdue != tc.overdue {
				t.Errorf("deadline %s at %s: overdue %v, want %v", r.Deadline(), now, overdue, tc.overdue)
			}
		})
	}
}

// otherReplicaHeard has another replica, replica-b, hear edge1's agent at
// heardAt and write its digest, and waits until this replica reads it.
func (f *fixture) otherReplicaHeard(heardAt time.Time, interval time.Duration) {
	f.t.Helper()
	b, err := liveness.New(liveness.Options{Namespace: ns, Identity: "replica-b", Client: f.client.CoreV1(),
		Informer: liveness.NewInformer(f.client, ns, 0), Clock: f.clock})
	if err != nil {
		f.t.Fatal(err)
	}
	f.clock.SetTime(heardAt)
	b.Heard(edge1, interval)
	b.Flush()
	waitFor(f.t, "replica-b's digest", func() bool {
		at, _, ok := f.live.Last(edge1)
		return ok && !at.Before(heardAt)
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return ok(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s", what)
	}
}
