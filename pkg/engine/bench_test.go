//go:build unix

package engine

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// The engine's side of one listed Secret changing at the designed scale (docs/design.md#scale):
// 1,000 HelmOps, each with one copy in 10 of 1,000 Clusters (10,000 rows).
// "one-helmop" hands the engine the changed HelmOp's rows, as the view now
// does; "every-helmop" hands it every HelmOp's rows, which is what a change
// cost when the view handed over the whole set each time.
//
// Run: go test -run '^$' -bench SetDesired ./pkg/engine/
func BenchmarkSetDesired(b *testing.B) {
	rowsOf := func(op int, rv string) []*courier.DownstreamCopy {
		var rows []*courier.DownstreamCopy
		for k := 0; k < 10; k++ {
			rows = append(rows, rowFor(fmt.Sprintf("op%d", op), fmt.Sprintf("c%d", op%100+100*k), "Secret", fmt.Sprintf("s%d", op), rv, ""))
		}
		return rows
	}
	opKey := func(op int) types.NamespacedName {
		return types.NamespacedName{Namespace: fleetNS, Name: fmt.Sprintf("op%d", op)}
	}
	// The rows are built before the timer starts: the view computes them,
	// and only the engine's part is measured. Two versions of HelmOp op7's
	// rows alternate, so that every iteration changes its copies.
	all := make([][]*courier.DownstreamCopy, 1000)
	for op := range all {
		all[op] = rowsOf(op, "1")
	}
	changed := [2][]*courier.DownstreamCopy{rowsOf(7, "2"), rowsOf(7, "3")}
	for _, mode := range []string{"one-helmop", "every-helmop"} {
		b.Run(mode, func(b *testing.B) {
			env := newEnv(b, nil)
			for op := range all {
				env.e.SetDesired(opKey(op), all[op])
			}
			env.e.DesiredComplete()
			drain(env.e.queue)
			b.ResetTimer()
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				start := cpuTime()
				if mode == "one-helmop" {
					env.e.SetDesired(opKey(7), changed[i%2])
				} else {
					for op := range all {
						rows := all[op]
						if op == 7 {
							rows = changed[i%2]
						}
						env.e.SetDesired(opKey(op), rows)
					}
				}
				cpu += cpuTime() - start
				b.StopTimer()
				if n := len(drain(env.e.queue)); n != 10 {
					b.Fatalf("%d clusters queued, want the 10 where the copy changed", n)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
		})
	}
}

// cpuTime is the CPU time this process has used (user and system, all
// threads): on a shared machine it varies far less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
