// Package report sends a courier-agent's outcome for each of its rows back
// to Courier (update downstreamcopies/<row>/status, docs/design.md#pull-delivery): a row when
// the engine's record of it changes, and every row at least once per
// report interval, which is the agent's heartbeat. Courier shows a pulled
// Cluster's rows Unreachable when its agent has not reported for three
// intervals, so every report carries the interval.
//
// Reporting never holds copying up: the engine only marks rows to send
// (Pending), and a report that fails is retried with backoff.
//
// Data flows one way: engine → Pending → Reporter → Courier. The engine
// and the Reporter each need the other's part when they are built (the
// engine tells of changes, the Reporter reads the engine's statuses), so
// the Pending set is made first and handed to both constructors: the
// engine as its OnStatusChange, the Reporter with the engine.
package report

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	courierclient "github.com/courier-dev/courier/pkg/generated/clientset/versioned/typed/courier/v1alpha1"
)

// AnnotationReportInterval, on a status report, is the agent's
// --report-interval as a Go duration: Courier takes the agent for gone
// after three of them without a report.
const AnnotationReportInterval = courier.AnnotationReportInterval

// Statuses is the engine's record of each row.
type Statuses interface {
	Status(rowKey string) (copycontract.Status, bool)
}

// Rows are the agent's rows as Courier sent them.
type Rows interface {
	Row(key string) (*v1alpha1.DownstreamCopy, bool)
	// Keys are the rows the engine is given; the heartbeat reports them.
	Keys() []string
}

// Pending is the set of rows to be reported: the rows whose status the
// engine changed (Changed, the engine's OnStatusChange), the heartbeat's
// and the ones whose report failed. It is made before the engine and the
// Reporter, and handed to both.
type Pending struct {
	mu    sync.Mutex
	dirty map[string]struct{}
	wake  chan struct{}
}

// NewPending returns an empty Pending set.
func NewPending() *Pending {
	return &Pending{dirty: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// Changed marks the rows whose status the engine changed, to be sent
// (the engine's OnStatusChange). It never blocks.
func (p *Pending) Changed(changes []copycontract.StatusChange) {
	p.mu.Lock()
	for _, ch := range changes {
		for _, key := range ch.Rows {
			p.dirty[key] = struct{}{}
		}
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// mark marks rows to be sent again, without waking the Reporter (the
// heartbeat, a retry).
func (p *Pending) mark(keys []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		p.dirty[k] = struct{}{}
	}
}

// take returns the marked rows and clears them.
func (p *Pending) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, len(p.dirty))
	for k := range p.dirty {
		keys = append(keys, k)
	}
	p.dirty = map[string]struct{}{}
	return keys
}

// Reporter sends rows' statuses upstream.
type Reporter struct {
	client   courierclient.DownstreamCopiesGetter
	interval time.Duration
	rows     Rows
	statuses Statuses
	pending  *Pending
	clock    clock.WithTicker
	// minBackoff is the first wait after a failed report; each failure in
	// a row doubles it, up to the report interval.
	minBackoff time.Duration
}

// New returns a Reporter that sends the rows marked in pending, with
// their status as statuses records it, through client, and beats every
// interval.
func New(client courierclient.DownstreamCopiesGetter, interval time.Duration, rows Rows, statuses Statuses, pending *Pending) *Reporter {
	return &Reporter{client: client, interval: interval, rows: rows, statuses: statuses, pending: pending,
		clock: clock.RealClock{}, minBackoff: time.Second}
}

// Run sends reports until ctx is done.
func (r *Reporter) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	beat := r.clock.NewTicker(r.interval)
	defer beat.Stop()
	var retry <-chan time.Time // set while backing off
	backoff := r.minBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.pending.wake:
			if retry != nil {
				continue // sent when the backoff is over
			}
		case <-beat.C():
			r.pending.mark(r.rows.Keys()) // every row the engine is given
			if retry != nil {
				continue
			}
		case <-retry:
		}
		if r.flush(ctx) {
			retry, backoff = nil, r.minBackoff
			continue
		}
		retry = r.clock.After(backoff)
		backoff = min(2*backoff, max(r.interval, r.minBackoff))
	}
}

// flush sends every marked row that has a status, and reports whether all
// went through. On the first failure it stops, and the rows not sent stay
// marked.
func (r *Reporter) flush(ctx context.Context) bool {
	keys := r.pending.take()
	ok := true
	for i, key := range keys {
		if ctx.Err() != nil {
			r.pending.mark(keys[i:])
			return true
		}
		err := r.send(ctx, key)
		if err == nil {
			continue
		}
		// Until Courier takes reports (or while it is away) this is
		// expected: copying goes on regardless.
		klog.FromContext(ctx).V(2).Info("Reporting a row's status failed; retrying", "row", key, "err", err)
		ok = false
		if !rowRefused(err) {
			// Courier is away or overloaded: the rest wait for the retry.
			r.pending.mark(keys[i:])
			return false
		}
		r.pending.mark([]string{key}) // this row's report was refused; the others may go through
	}
	return ok
}

// rowRefused reports whether Courier answered a report with a client
// error about that row (a 4xx other than 429), rather than not at all.
func rowRefused(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != http.StatusTooManyRequests
}

// send PUTs one row's status; a row without a status or no longer there
// is skipped.
func (r *Reporter) send(ctx context.Context, key string) error {
	st, ok := r.statuses.Status(key)
	if !ok {
		return nil
	}
	row, ok := r.rows.Row(key)
	if !ok {
		return nil
	}
	_, err := r.client.DownstreamCopies(row.Namespace).UpdateStatus(ctx, Body(row, st, r.interval), metav1.UpdateOptions{})
	return err
}

// Body is the report of one row: the row with the engine's status and the
// report interval. It carries no resourceVersion: a report replaces the
// last one whatever it was.
func Body(row *v1alpha1.DownstreamCopy, st copycontract.Status, interval time.Duration) *v1alpha1.DownstreamCopy {
	return &v1alpha1.DownstreamCopy{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "DownstreamCopy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: row.Namespace, Name: row.Name,
			Annotations: map[string]string{AnnotationReportInterval: interval.String()}},
		Spec: row.Spec,
		Status: v1alpha1.DownstreamCopyStatus{
			Phase:                 v1alpha1.CopyPhase(st.Phase),
			Message:               st.Message,
			SyncedResourceVersion: st.SyncedResourceVersion,
			LastSyncTime:          st.LastSyncTime,
		},
	}
}
