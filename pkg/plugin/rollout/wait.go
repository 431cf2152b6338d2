// Package rollout waits, as `kubectl rollout status` does, for an owner's
// copies to reach its sources' current versions. It trusts only what the
// summary view floors (a GET by name, a watch pinned by name: each
// reflects the sources' resourceVersions as of the request, see
// docs/summaries.md), so a wait started right after a source write never
// returns on the state before it.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// Summaries is what the wait reads: both calls are floored by the view.
type Summaries interface {
	GetSummary(ctx context.Context, namespace, name string) (*v1alpha1.DownstreamCopySummary, error)
	WatchSummary(ctx context.Context, namespace, name, rv string) (watch.Interface, error)
}

// Options tune a wait.
type Options struct {
	// Timeout ends the wait with an error; 0 waits without limit, as
	// `kubectl rollout status --timeout=0` does.
	Timeout time.Duration
	// FailAfter ends the wait with an error once some copy has been
	// Conflict, Forbidden, Denied, Invalid or Unreachable this long.
	FailAfter time.Duration
	// Tick is how often progress and FailAfter are looked at between
	// events (1s when 0).
	Tick time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// RestartPause is the pause between a watch that ended and the next
	// GET (restartPause when 0).
	RestartPause time.Duration
}

// Progress is told every summary the wait sees, and once at the end.
type Progress interface {
	Observe(s *v1alpha1.DownstreamCopySummary, now time.Time)
	Done(s *v1alpha1.DownstreamCopySummary, now time.Time, err error)
}

// blocking are the phases that fail a wait once they last FailAfter: they
// need someone to act. SourceMissing and Pending may clear on their own.
var blocking = []cellstate.State{cellstate.Conflict, cellstate.Forbidden, cellstate.Denied, cellstate.Invalid, cellstate.Unreachable}

// ErrNotReady is what errors.Is finds in the error of a wait that failed
// or timed out.
var ErrNotReady = errors.New("not ready")

// notReady is the error of a wait that failed or timed out; its message
// names the rows.
type notReady struct{ msg string }

func (e notReady) Error() string        { return e.msg }
func (e notReady) Is(target error) bool { return target == ErrNotReady }

func notReadyf(format string, a ...any) error { return notReady{fmt.Sprintf(format, a...)} }

// Wait waits until the summary of owner in namespace is Ready.
func Wait(ctx context.Context, src Summaries, namespace string, owner load.Owner, o Options, p Progress) error {
	if o.Timeout < 0 {
		return fmt.Errorf("--timeout must not be negative, got %v", o.Timeout)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.RestartPause <= 0 {
		o.RestartPause = restartPause
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	w := &waiter{src: src, ns: namespace, owner: owner, o: o, p: p}
	err := w.run(ctx)
	p.Done(w.last, o.Now(), err)
	return err
}

type waiter struct {
	src          Summaries
	ns           string
	owner        load.Owner
	o            Options
	p            Progress
	last         *v1alpha1.DownstreamCopySummary
	failingSince time.Time
}

// run alternates a floored GET and a watch pinned by name from it; a
// watch that ends (a timeout, a restart of the server) is followed by a
// new GET, never by trusting an unfloored list.
func (w *waiter) run(ctx context.Context) error {
	for {
		s, err := w.src.GetSummary(ctx, w.ns, w.owner.SummaryName())
		if err != nil {
			if ctx.Err() != nil {
				return w.timedOut()
			}
			if errors.Is(err, load.ErrNotFound) {
				return fmt.Errorf("%s has no copies in namespace %s (no downstreamcopysummary %q): is the name right, and does it list downstreamResources?",
					w.owner, w.ns, w.owner.SummaryName())
			}
			return err
		}
		if done, err := w.observe(s); done {
			return err
		}
		if err := w.follow(ctx, s.ResourceVersion); err != errRestart {
			return err
		}
		// The watch ended: GET again after a pause, so that a server that
		// ends every watch at once is not asked in a tight loop.
		select {
		case <-ctx.Done():
			return w.timedOut()
		case <-time.After(w.o.RestartPause):
		}
	}
}

// restartPause is the pause between a watch that ended and the next GET.
const restartPause = 200 * time.Millisecond

var errRestart = errors.New("watch ended")

// follow watches until the wait is decided or the watch ends (errRestart).
func (w *waiter) follow(ctx context.Context, rv string) error {
	wi, err := w.src.WatchSummary(ctx, w.ns, w.owner.SummaryName(), rv)
	if err != nil {
		if ctx.Err() != nil {
			return w.timedOut()
		}
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return errRestart // the GET's version left the server's history: GET again
		}
		return err
	}
	defer wi.Stop()
	tick := time.NewTicker(w.o.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return w.timedOut()
		case <-tick.C:
			if done, err := w.observe(w.last); done {
				return err
			}
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return errRestart
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				s, ok := ev.Object.(*v1alpha1.DownstreamCopySummary)
				if !ok {
					continue
				}
				if done, err := w.observe(s); done {
					return err
				}
			case watch.Deleted:
				return fmt.Errorf("%s no longer has copies in namespace %s: its summary was removed while waiting", w.owner, w.ns)
			case watch.Error:
				return errRestart
			}
		}
	}
}

// observe looks at a summary: done with nil when Ready, done with an
// error when a blocking phase has lasted FailAfter.
func (w *waiter) observe(s *v1alpha1.DownstreamCopySummary) (bool, error) {
	now := w.o.Now()
	w.last = s
	w.p.Observe(s, now)
	if ready(s) {
		return true, nil
	}
	if blockingCount(s) == 0 {
		w.failingSince = time.Time{}
		return false, nil
	}
	if w.failingSince.IsZero() {
		w.failingSince = now
	}
	if now.Sub(w.failingSince) >= w.o.FailAfter {
		return true, notReadyf("%s has copies failing for %v or longer:\n%s", w.owner,
			w.o.FailAfter, rowsOf(s, w.ns, w.owner, true))
	}
	return false, nil
}

func (w *waiter) timedOut() error {
	if w.last == nil {
		return notReadyf("timed out after %v before reading the summary of %s", w.o.Timeout, w.owner)
	}
	return notReadyf("timed out after %v waiting for %s: %d of %d copies synced, %d of %d Clusters ready:\n%s",
		w.o.Timeout, w.owner, w.last.Status.SyncedCopies, w.last.Status.Copies, w.last.Status.ReadyClusters, w.last.Status.Clusters,
		rowsOf(w.last, w.ns, w.owner, false))
}

// ready: the summary's Ready condition is True. Nothing else counts: the
// view sets it only when every wanted copy is synced at its source's
// current version as of the read.
func ready(s *v1alpha1.DownstreamCopySummary) bool {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func blockingCount(s *v1alpha1.DownstreamCopySummary) int32 {
	var n int32
	for _, st := range blocking {
		n += s.Status.Phases[string(st)]
	}
	return n
}

// rowsOf names the rows the summary holds as not ready (only the
// blocking ones when onlyBlocking), and how to list the rest.
func rowsOf(s *v1alpha1.DownstreamCopySummary, ns string, owner load.Owner, onlyBlocking bool) string {
	var b strings.Builder
	named := 0
	for _, r := range s.Status.NonReady {
		if onlyBlocking && !isBlocking(cellstate.State(r.Phase)) {
			continue
		}
		named++
		fmt.Fprintf(&b, "  %s %s: Cluster %s, %s/%s: %s\n", r.Phase, r.Name, r.Cluster, r.Source.Kind, r.Source.Name, r.Message)
	}
	total := int(s.Status.Copies - s.Status.SyncedCopies)
	if onlyBlocking {
		total = int(blockingCount(s))
	}
	if named == 0 && total == 0 {
		if c := readyCondition(s); c.Message != "" {
			fmt.Fprintf(&b, "  %s: %s\n", c.Reason, c.Message)
		}
	}
	if total > named || s.Status.Incomplete {
		fmt.Fprintf(&b, "  ... %d not named here: kubectl get dcp -n %s --field-selector %s,status.phase!=Synced\n",
			max(total-named, 0), ns, owner.Rows())
	}
	return strings.TrimRight(b.String(), "\n")
}

func isBlocking(st cellstate.State) bool {
	for _, b := range blocking {
		if b == st {
			return true
		}
	}
	return false
}

func readyCondition(s *v1alpha1.DownstreamCopySummary) metav1.Condition {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}
