package bench

import (
	"context"
	"testing"
	"time"

	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
)

// waitSynced waits until the workspace shows want DownstreamCopy rows, all
// Synced, read through the aggregator as a user would.
func waitSynced(t *testing.T, fc versioned.Interface, ns string, want int, timeout time.Duration) {
	t.Helper()
	if err := fleetsim.WaitSynced(context.Background(), fc, ns, want, timeout); err != nil {
		t.Fatal(err)
	}
}

var rowsSummary = fleetsim.RowsSummary
