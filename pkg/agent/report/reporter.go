// Package report sends a courier-agent's outcome for each of its rows back
// to Courier (update downstreamcopies/<row>/status, DESIGN §9): a row when
// the engine's record of it changes, and every row at least once per
// report interval, which is the agent's heartbeat. Courier shows a pulled
// Cluster's rows Unreachable when its agent has not reported for three
// intervals, so every report carries the interval.
//
// Reporting never holds copying up: the engine only marks rows to send,
// and a report that fails is retried with backoff.
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

// Reporter sends rows' statuses upstream.
type Reporter struct {
	client   courierclient.DownstreamCopiesGetter
	interval time.Duration
	rows     Rows
	statuses Statuses
	clock    clock.WithTicker
	// minBackoff is the first wait after a failed report; each failure in
	// a row doubles it, up to the report interval.
	minBackoff time.Duration

	mu    sync.Mutex
	dirty map[string]struct{}
	wake  chan struct{}
}

// New returns a Reporter that updates rows' status through client and
// beats every interval.
func New(client courierclient.DownstreamCopiesGetter, interval time.Duration, rows Rows, statuses Statuses) *Reporter {
	return &Reporter{client: client, interval: interval, rows: rows, statuses: statuses, clock: clock.RealClock{},
		minBackoff: time.Second, dirty: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// SetStatuses names the engine, which is built after the Reporter (the
// engine is told of the Reporter's Changed): call it before Run.
func (r *Reporter) SetStatuses(s Statuses) { r.statuses = s }

// Changed marks the rows whose status the engine changed, to be sent
// (the engine's OnStatusChange). It never blocks.
func (r *Reporter) Changed(changes []copycontract.StatusChange) {
	r.mu.Lock()
	for _, ch := range changes {
		for _, key := range ch.Rows {
			r.dirty[key] = struct{}{}
		}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// markAll marks every row the engine is given: the heartbeat.
func (r *Reporter) markAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range r.rows.Keys() {
		r.dirty[key] = struct{}{}
	}
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
		case <-r.wake:
			if retry != nil {
				continue // sent when the backoff is over
			}
		case <-beat.C():
			r.markAll()
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
	r.mu.Lock()
	keys := make([]string, 0, len(r.dirty))
	for k := range r.dirty {
		keys = append(keys, k)
	}
	r.dirty = map[string]struct{}{}
	r.mu.Unlock()
	ok := true
	for i, key := range keys {
		if ctx.Err() != nil {
			r.remark(keys[i:])
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
			r.remark(keys[i:])
			return false
		}
		r.remark([]string{key}) // this row's report was refused; the others may go through
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

func (r *Reporter) remark(keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.dirty[k] = struct{}{}
	}
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
