package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// readyWait is the rotation workflow's wait, measured: from the
// moment a round's source change returns, what `kubectl wait
// --for=condition=Ready dcs/<helmop>` does -- a list by metadata.name, then
// a watch from the list's resourceVersion -- until the summary's Ready
// condition is True. The summary read by name is floored by the sources'
// live resourceVersions, so the wait never returns on the state before
// the change.
type readyWait struct {
	done chan struct{}
	took time.Duration
	err  error
}

// startReadyWait starts the wait for the summary name in ns; t0 is when
// the change was made.
func startReadyWait(c versioned.Interface, ns, name string, t0 time.Time, budget time.Duration) *readyWait {
	r := &readyWait{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		r.err = waitReady(ctx, c, ns, name)
		r.took = time.Since(t0)
	}()
	return r
}

// result waits for the wait to end and returns how long after the change
// the summary said Ready.
func (r *readyWait) result() (time.Duration, error) {
	<-r.done
	return r.took, r.err
}

func waitReady(ctx context.Context, c versioned.Interface, ns, name string) error {
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	summaries := c.CourierV1alpha1().DownstreamCopySummaries(ns)
	list, err := summaries.List(ctx, metav1.ListOptions{FieldSelector: byName})
	if err != nil {
		return err
	}
	for i := range list.Items {
		if ready(&list.Items[i]) {
			return nil
		}
	}
	w, err := summaries.Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("summary %s/%s not Ready: %w", ns, name, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of summary %s/%s closed", ns, name)
			}
			if s, isSummary := ev.Object.(*v1alpha1.DownstreamCopySummary); isSummary && ev.Type != watch.Deleted && ready(s) {
				return nil
			}
		}
	}
}

func ready(s *v1alpha1.DownstreamCopySummary) bool {
	return meta.IsStatusConditionTrue(s.Status.Conditions, "Ready")
}

// readyPair is one round's time to Ready=True and its time to the last
// copy, both from the change.
type readyPair struct{ ready, last time.Duration }

// fastCourier is a client of Courier's API through the aggregator whose
// rate limiter never delays the bench's reads.
func fastCourier(t *testing.T) versioned.Interface {
	c, err := versioned.NewForConfig(fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readyNote says, per kind, how long after a change the summary said
// Ready=True, beside the time to the last copy downstream, and the worst
// lag between the two.
func readyNote(n int, kind string, pairs []readyPair) string {
	var ready, last []time.Duration
	var lag time.Duration
	for _, p := range pairs {
		ready, last = append(ready, p.ready), append(last, p.last)
		lag = max(lag, p.ready-p.last)
	}
	return fmt.Sprintf("N=%d, %s: the summary's Ready=True (kubectl wait's list and watch by name, started when the change returned) after %s; "+
		"the last copy downstream after %s; Ready at most %s after the last copy",
		n, kind, durations(ready), durations(last), lag.Round(time.Millisecond))
}
