package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// waitSynced waits until the workspace shows want DownstreamCopy rows, all
// Synced, read through the aggregator as a user would.
func waitSynced(t *testing.T, fc versioned.Interface, ns string, want int, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := fc.CourierV1alpha1().DownstreamCopies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		synced := 0
		for _, r := range list.Items {
			if r.Status.Phase == courierv1alpha1.CopyPhaseSynced {
				synced++
			}
		}
		return len(list.Items) == want && synced == want, nil
	})
	if err != nil {
		t.Fatalf("rows in %s not all Synced:\n%s", ns, rowsSummary(fc, ns))
	}
}

// rowsSummary counts the workspace's rows by phase, with one message per
// phase, for failures.
func rowsSummary(fc versioned.Interface, ns string) string {
	list, err := fc.CourierV1alpha1().DownstreamCopies(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	count := map[courierv1alpha1.CopyPhase]int{}
	msg := map[courierv1alpha1.CopyPhase]string{}
	for _, r := range list.Items {
		count[r.Status.Phase]++
		msg[r.Status.Phase] = r.Status.Message
	}
	var b strings.Builder
	for p, c := range count {
		fmt.Fprintf(&b, "  %s: %d (e.g. %s)\n", p, c, msg[p])
	}
	return b.String()
}
