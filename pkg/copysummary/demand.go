package copysummary

import (
	"context"
	"time"
)

// DefaultIdleWindow is the default coalescing window while nobody watches
// the summaries on this replica.
//
// Every replica serves every summary, but a summary's readers are few and
// a change is many rows: at N=1,000 a change of every source recomputed
// the one owner's summary of 10,000 rows about a hundred times on every
// replica, 0.3 s of CPU each, for summaries no one was looking at
// (docs/benchmarks.md). Without a watcher the summaries still follow the
// rows, and the Ready condition's lastTransitionTime is the time of the
// recompute that saw the change: within a window when someone watches,
// within the idle window otherwise.
const DefaultIdleWindow = 5 * time.Second

// maxSyncWait bounds how long Sync holds a read back: a summarizer that
// is not following the rows (not started, or watching them again) does
// not hold requests up for longer; they are served what is stored.
const maxSyncWait = 5 * time.Second

// Sync returns once the stored summaries reflect every row change made
// before the call: the summarizer has seen those changes and recomputed
// the owners they touched. The REST layer calls it before every get, list
// and watch, so that what a reader is served is never older than the rows
// at its request, whether or not anyone watched the summaries until then.
// It returns an error when ctx ends, or maxSyncWait passes, first.
func (s *Summarizer) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, maxSyncWait)
	defer cancel()
	req := make(chan struct{})
	select {
	case s.syncs <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// delay is how long until dirty owners are due at now: a window after the
// last flush while someone watches the summaries; otherwise an idle
// window after it, looked at again every window so that a watcher who
// arrives meanwhile waits no longer than a window.
func (s *Summarizer) delay(now time.Time) time.Duration {
	d := s.lastFlush.Add(s.window).Sub(now)
	if !s.watched() {
		d = max(d, min(s.window, s.lastFlush.Add(s.idleWindow).Sub(now)))
	}
	return max(0, d)
}
