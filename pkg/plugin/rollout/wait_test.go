package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/fixture"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// summaries serves scripted GETs (the last repeats) and one watch per
// call fed from a script of events; a script ending closes the watch.
type summaries struct {
	mu       sync.Mutex
	watchErr error // the first watch's error
	gets     []*v1alpha1.DownstreamCopySummary
	getErr   error
	watches  [][]*v1alpha1.DownstreamCopySummary
	nGet     int
	nWatch   int
}

func (f *summaries) GetSummary(_ context.Context, _, _ string) (*v1alpha1.DownstreamCopySummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return nil, f.getErr
	}
	s := f.gets[min(f.nGet, len(f.gets)-1)]
	f.nGet++
	return s, nil
}

func (f *summaries) WatchSummary(_ context.Context, _, _, _ string) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.watchErr; err != nil {
		f.watchErr = nil
		return nil, err
	}
	var evs []*v1alpha1.DownstreamCopySummary
	if f.nWatch < len(f.watches) {
		evs = f.watches[f.nWatch]
	}
	f.nWatch++
	fw := watch.NewFakeWithChanSize(len(evs), false)
	for _, s := range evs {
		fw.Modify(s)
	}
	if f.nWatch <= len(f.watches) {
		fw.Stop() // this script ends: the watch closes and the wait GETs again
	}
	return fw, nil
}

// summary is a summary with synced of copies synced, the given phases
// and Ready condition.
func summary(synced, copies int32, reason string, status metav1.ConditionStatus, nonReady ...v1alpha1.NonReadyCopy) *v1alpha1.DownstreamCopySummary {
	s := &v1alpha1.DownstreamCopySummary{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: "fleet-default", ResourceVersion: "7"}}
	s.Status.Copies, s.Status.SyncedCopies, s.Status.Clusters = copies, synced, copies
	s.Status.ReadyClusters = synced
	s.Status.Phases = map[string]int32{"Synced": synced}
	for _, r := range nonReady {
		s.Status.Phases[string(r.Phase)]++
		if r.Phase != v1alpha1.CopyPhasePending {
			s.Status.Failing++
		}
	}
	s.Status.NonReady = nonReady
	s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: "Secret example-credentials is at resourceVersion 12 upstream; this summary was computed at 10"}}
	return s
}

var (
	owner    = load.Owner{Kind: v1alpha1.OwnerKindHelmOp, Name: "example"}
	conflict = v1alpha1.NonReadyCopy{Name: "example.downstream-2.secret.example-credentials", Cluster: "downstream-2",
		Source: v1alpha1.CopySource{Kind: "Secret", Name: "example-credentials"}, Phase: v1alpha1.CopyPhaseConflict,
		Message: "Secret app/example-credentials exists in cluster downstream-2 and is not managed by Courier; it is left unchanged"}
	pending = v1alpha1.NonReadyCopy{Name: "example.downstream-1.secret.example-credentials", Cluster: "downstream-1",
		Source: v1alpha1.CopySource{Kind: "Secret", Name: "example-credentials"}, Phase: v1alpha1.CopyPhasePending,
		Message: "Secret fleet-default/example-credentials is not copied to cluster downstream-1 yet"}
)

// clock advances step at every reading.
func clock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		return t
	}
}

// TestWaitReturnsOnReadyOnly: right after a source write the floored GET
// says SourceChanged although every copy still counts as synced (at the
// old version); the wait goes on until the watch shows Ready=True, and the
// lines say each change once.
func TestWaitReturnsOnReadyOnly(t *testing.T) {
	f := &summaries{
		gets: []*v1alpha1.DownstreamCopySummary{summary(2, 2, "SourceChanged", metav1.ConditionFalse)},
		watches: [][]*v1alpha1.DownstreamCopySummary{{
			summary(1, 2, "Progressing", metav1.ConditionFalse, pending),
			summary(1, 2, "Progressing", metav1.ConditionFalse, pending),
			summary(2, 2, "Synced", metav1.ConditionTrue),
			summary(0, 2, "Progressing", metav1.ConditionFalse), // after Ready: never read
		}},
	}
	var out strings.Builder
	err := Wait(context.Background(), f, "fleet-default", owner, Options{FailAfter: time.Minute, Now: clock(time.Second)}, &Lines{Out: &out, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Golden(t, "lines-ready", out.String())
}

// TestWaitNeverReadyWithoutCondition: a summary whose counts are all
// synced but whose Ready condition is not True (or is missing) does not
// end the wait; the timeout does.
func TestWaitNeverReadyWithoutCondition(t *testing.T) {
	noCond := summary(2, 2, "", metav1.ConditionTrue)
	noCond.Status.Conditions = nil
	f := &summaries{gets: []*v1alpha1.DownstreamCopySummary{summary(2, 2, "SourceChanged", metav1.ConditionFalse), noCond},
		watches: [][]*v1alpha1.DownstreamCopySummary{nil}}
	err := Wait(context.Background(), f, "fleet-default", owner, Options{Timeout: 200 * time.Millisecond, FailAfter: time.Minute, Tick: 10 * time.Millisecond, RestartPause: time.Millisecond}, &Lines{Out: &strings.Builder{}, Owner: owner})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("err = %v", err)
	}
	if f.nGet < 2 {
		t.Errorf("a closed watch was not followed by a new GET: %d GETs", f.nGet)
	}
}

// TestWaitFailsAfter: a Conflict that lasts --fail-after ends the wait
// with an error naming the row; one that clears before does not.
func TestWaitFailsAfter(t *testing.T) {
	f := &summaries{gets: []*v1alpha1.DownstreamCopySummary{summary(1, 2, "Failing", metav1.ConditionFalse, conflict)}}
	var out strings.Builder
	err := Wait(context.Background(), f, "fleet-default", owner, Options{FailAfter: 30 * time.Second, Tick: time.Millisecond, Now: clock(10 * time.Second)},
		&Lines{Out: &out, Owner: owner})
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("err = %v", err)
	}
	fixture.Golden(t, "fail-after", out.String()+"error: "+err.Error()+"\n")

	cleared := &summaries{gets: []*v1alpha1.DownstreamCopySummary{summary(1, 2, "Failing", metav1.ConditionFalse, conflict)},
		watches: [][]*v1alpha1.DownstreamCopySummary{{summary(1, 2, "Progressing", metav1.ConditionFalse, pending), summary(2, 2, "Synced", metav1.ConditionTrue)}}}
	if err := Wait(context.Background(), cleared, "fleet-default", owner, Options{FailAfter: 30 * time.Second, Now: clock(10 * time.Second)},
		&Lines{Out: &strings.Builder{}, Owner: owner}); err != nil {
		t.Errorf("a Conflict that cleared within --fail-after failed the wait: %v", err)
	}
}

// TestWaitExpiredWatch: a watch refused because the GET's version left
// the server's history is followed by a new GET, not a failure.
func TestWaitExpiredWatch(t *testing.T) {
	f := &summaries{gets: []*v1alpha1.DownstreamCopySummary{summary(1, 2, "Progressing", metav1.ConditionFalse, pending), summary(2, 2, "Synced", metav1.ConditionTrue)},
		watchErr: apierrors.NewResourceExpired("too old resource version: 7 (9)")}
	if err := Wait(context.Background(), f, "fleet-default", owner, Options{FailAfter: time.Minute}, &Lines{Out: &strings.Builder{}, Owner: owner}); err != nil {
		t.Fatalf("err = %v", err)
	}
	if f.nGet != 2 {
		t.Errorf("%d GETs, want 2", f.nGet)
	}
}

func TestWaitBadInput(t *testing.T) {
	f := &summaries{getErr: fmt.Errorf("downstreamcopysummaries %q: %w", "nope", load.ErrNotFound)}
	err := Wait(context.Background(), f, "fleet-default", load.Owner{Kind: v1alpha1.OwnerKindHelmOp, Name: "nope"}, Options{}, &Lines{Out: &strings.Builder{}})
	if err == nil || !strings.Contains(err.Error(), `HelmOp "nope" has no copies in namespace fleet-default`) {
		t.Errorf("owner not found: %v", err)
	}
	if err := Wait(context.Background(), f, "fleet-default", owner, Options{Timeout: -time.Second}, &Lines{Out: &strings.Builder{}}); err == nil ||
		!strings.Contains(err.Error(), "--timeout must not be negative") {
		t.Errorf("negative timeout: %v", err)
	}
}

// TestBarGolden: the terminal's progress line: bar, counts, rate, time
// left, each redraw starting with a carriage return.
func TestBarGolden(t *testing.T) {
	var out strings.Builder
	b := &Bar{Out: &out, Owner: owner, Width: 80}
	narrow := &Bar{Out: &out, Owner: owner, Width: 40}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, s := range []*v1alpha1.DownstreamCopySummary{
		summary(0, 2000, "SourceChanged", metav1.ConditionFalse),
		summary(500, 2000, "Progressing", metav1.ConditionFalse),
		summary(1500, 2000, "Failing", metav1.ConditionFalse, conflict),
		summary(2000, 2000, "Synced", metav1.ConditionTrue),
	} {
		b.Observe(s, now.Add(time.Duration(i)*5*time.Second))
		out.WriteString("\n") // one redraw per golden line
		narrow.Observe(s, now.Add(time.Duration(i)*5*time.Second))
		out.WriteString("\n")
	}
	b.Done(summary(2000, 2000, "Synced", metav1.ConditionTrue), now.Add(15*time.Second), nil)
	fixture.Golden(t, "bar", out.String())
}
