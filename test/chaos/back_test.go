package chaos

import (
	"sync"
	"testing"
	"time"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// backFigure is one of scenario 2's figures after the stopped downstream
// is back: how long it took (0: not within backWithin) and the last thing
// seen while waiting.
type backFigure struct {
	what string
	took time.Duration
	last string
}

// timeBack times, from one instant (the downstream kube-apiserver answers
// its readiness check again), three things a user waits for, each on its
// own so that a slow one does not hide behind another: the Clusters'
// copies on downstream d holding value, their rows Synced on the replica
// that delivers to them (read from it directly, where the engine's record
// shows at once), and their rows Synced through the aggregator (as kubectl
// reads them). With one replica the last two differ by what the
// aggregator adds; with several, by the status object (docs/reliability.md).
func (f *fleetRun) timeBack(t *testing.T, d int, clusters map[string]bool, value string) []backFigure {
	t.Helper()
	direct, err := versioned.NewForConfig(courier.Config)
	if err != nil {
		t.Fatal(err)
	}
	figs := []backFigure{{what: "copies current"}, {what: "rows Synced on the deliverer"}, {what: "rows Synced through the aggregator"}}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		figs[0].took, figs[0].last = f.waitCurrent(t, f.downstreamOf, d, value, backWithin)
	}()
	go func() {
		defer wg.Done()
		figs[1].took, figs[1].last = waitRowsOf(direct, clusters, courierv1alpha1.CopyPhaseSynced, backWithin)
	}()
	go func() {
		defer wg.Done()
		figs[2].took, figs[2].last = waitRowsOf(f.fc, clusters, courierv1alpha1.CopyPhaseSynced, backWithin)
	}()
	wg.Wait()
	return figs
}
