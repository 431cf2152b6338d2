//go:build unix

package copyview

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// The view at the designed scale (docs/design.md#scale): 10,000 rows in one workspace, laid out two
// ways.
//
//   - "1000ops": 1,000 HelmOps, each listing its own Secret and selecting
//     10 of the 1,000 Clusters by label (so each Cluster has 10 copies);
//   - "1op": one HelmOp listing 10 Secrets, on all 1,000 Clusters.
//
// Each benchmark has two sub-benchmarks: "incremental" is the controller
// (the event's handler, then the queue), "whole" is what the controller did
// before it worked per HelmOp: compute every row, overlay every status,
// and Replace the whole set. Both run against the same fake engine, which
// holds a status for every row and costs nothing itself (the engine's own
// SetDesired is not part of either figure).
//
// Run: go test -run '^$' -bench . -benchtime 20x ./pkg/copyview/

type benchLayout struct {
	name string
	objs func() []any
	// changed is a listed Secret and how many rows name it.
	changed     string
	changedRows int
	// row is a row whose status changes.
	row string
}

var benchLayouts = []benchLayout{
	{name: "1000ops", objs: thousandHelmOps, changed: "s7", changedRows: 10, row: "op7.c7.secret.s7"},
	{name: "1op", objs: oneHelmOp, changed: "s7", changedRows: 1000, row: "app.c7.secret.s7"},
}

// thousandHelmOps: op<i> lists Secret s<i> and selects the 10 Clusters of
// shard i mod 100; Cluster c<j> is in shard j mod 100.
func thousandHelmOps() []any {
	var objs []any
	for i := 0; i < 1000; i++ {
		shard := map[string]string{"shard": fmt.Sprint(i % 100)}
		objs = append(objs,
			cluster(fmt.Sprintf("c%d", i), shard),
			source("Secret", fmt.Sprintf("s%d", i), "1"),
			helmOp(fmt.Sprintf("op%d", i), listing(fmt.Sprintf("Secret/s%d", i)),
				fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{MatchLabels: shard}}))
	}
	return objs
}

// oneHelmOp: app lists Secrets s0..s9 and has no targets (the default
// group: every Cluster).
func oneHelmOp() []any {
	objs := []any{defaultGroup}
	var entries []string
	for i := 0; i < 10; i++ {
		entries = append(entries, fmt.Sprintf("Secret/s%d", i))
		objs = append(objs, source("Secret", fmt.Sprintf("s%d", i), "1"))
	}
	objs = append(objs, helmOp("app", listing(entries...)))
	for i := 0; i < 1000; i++ {
		objs = append(objs, cluster(fmt.Sprintf("c%d", i), nil))
	}
	return objs
}

// benchFixture is a fixture after its first pass, with an engine status
// (Synced) for every row.
func benchFixture(b *testing.B, l benchLayout) *fixture {
	b.Helper()
	f := newFixture(b, l.objs()...)
	rows := f.rows()
	if len(rows) != 10000 {
		b.Fatalf("%d rows, want 10000", len(rows))
	}
	for _, r := range rows {
		f.engine.setStatus(rowKey(r), copycontract.Status{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "1", Message: "the copy matches its source"})
	}
	f.wholeRecompute()
	return f
}

// wholeRecompute is the controller's pass before it worked per HelmOp.
func (f *fixture) wholeRecompute() {
	rows, _, err := Compute(f.c.inputs)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range rows {
		if st, ok := f.engine.Status(rowKey(r)); ok {
			r.Status = rowstatus.Compose(r.Status, r.Spec.Cluster, rowstatus.Delivery{Record: &st})
		}
	}
	rows = withLeftovers(rows, nil)
	f.c.mu.Lock()
	f.c.stampLocked(rows)
	f.c.mu.Unlock()
	f.store.Replace(rows)
}

// reportWrites reports the rows written per operation.
func reportWrites(b *testing.B, f *fixture, before uint64) {
	b.ReportMetric(float64(f.rv()-before)/float64(b.N), "writes/op")
}

// cpuTime is the CPU time this process has used (user and system, all
// threads, so the garbage collector's work counts). On a shared machine it
// varies far less than the wall time ns/op reports.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// One listed Secret changes (a new resourceVersion each time).
func BenchmarkSourceChange(b *testing.B) {
	for _, l := range benchLayouts {
		for _, mode := range []string{"incremental", "whole"} {
			b.Run(l.name+"/"+mode, func(b *testing.B) {
				f := benchFixture(b, l)
				b.ResetTimer()
				before, cpu := f.rv(), cpuTime()
				for i := 0; i < b.N; i++ {
					old, _, _ := f.caches.secrets.GetByKey("fleet-default/" + l.changed)
					next := withRV(old.(*metav1.PartialObjectMetadata), fmt.Sprint(i+2))
					if mode == "whole" {
						_ = f.caches.secrets.Update(next)
						f.wholeRecompute()
						continue
					}
					f.update(old, next)
					f.drain()
				}
				b.StopTimer()
				reportCPU(b, cpu)
				reportWrites(b, f, before)
				if got := f.rv() - before; got != uint64(b.N*l.changedRows) {
					b.Errorf("%d rows written, want %d", got, b.N*l.changedRows)
				}
			})
		}
	}
}

// One row's status changes (Conflict, then Synced again, and so on) among
// 10,000.
func BenchmarkStatusChange(b *testing.B) {
	for _, l := range benchLayouts {
		for _, mode := range []string{"incremental", "whole"} {
			b.Run(l.name+"/"+mode, func(b *testing.B) {
				f := benchFixture(b, l)
				key := "fleet-default/" + l.row
				r := f.row(l.row)
				op := types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.HelmOp}
				b.ResetTimer()
				before, cpu := f.rv(), cpuTime()
				for i := 0; i < b.N; i++ {
					st := copycontract.Status{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "1", Message: "the copy matches its source"}
					if i%2 == 0 {
						st = copycontract.Status{Phase: courier.CopyPhaseConflict, Message: fmt.Sprintf("conflict %d", i)}
					}
					f.engine.setStatus(key, st)
					if mode == "whole" {
						f.wholeRecompute()
						continue
					}
					f.c.StatusChanged([]copycontract.StatusChange{{HelmOp: op, Rows: []string{key}}})
					f.drain()
				}
				b.StopTimer()
				reportCPU(b, cpu)
				reportWrites(b, f, before)
				if got := f.rv() - before; got != uint64(b.N) {
					b.Errorf("%d rows written, want %d", got, b.N)
				}
			})
		}
	}
}
