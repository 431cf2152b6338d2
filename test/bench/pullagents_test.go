package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	agentreport "github.com/courier-dev/courier/pkg/agent/report"
	courierapi "github.com/courier-dev/courier/pkg/apis/courier"
	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
)

// simAgent is one simulated courier-agent: its Cluster's watch of its rows
// and what it knows, as pkg/agent's informer and engine know it.
type simAgent struct {
	cluster, user string

	mu sync.Mutex
	// lastRV is the last resourceVersion its watch saw (event or
	// bookmark): where it resumes.
	lastRV string
	// unavailable: lastRV was refused (410), so it relists from scratch.
	unavailable bool
	// copied is the source resourceVersion its copy was made from: a row
	// carrying it needs no payload read (the engine finds the copy
	// current by that version).
	copied string
	row    *courierv1alpha1.DownstreamCopy
	// watchingAt is when its watch last became current (UnixNano): open
	// after a resume, past the initial-events-end bookmark after a
	// watch-list.
	watchingAt atomic.Int64
	watching   atomic.Bool
	// ends counts its watches that ended.
	ends atomic.Int64
}

// agentFleet runs the simulated agents. They share the upstream admin's
// client (its HTTP/2 connections), each request impersonating its agent,
// and do what client-go's reflector does for the real agent's informer
// (WatchListClient is on by default in client-go 0.37): a watch-list
// (sendInitialEvents, resourceVersionMatch=NotOlderThan, bookmarks) to
// start; after the server closes a watch, a watch from the last
// resourceVersion at once; after an error, a watch-list from the last
// resourceVersion (from nothing once that was refused with 410) after the
// reflector's backoff (800 ms doubling to 30 s, jitter 1.0). A row whose
// source resourceVersion differs from the one its copy was made from
// is read (GET .../payload) when readPayloads is on, as the real engine
// reads it; with it off the agent takes its copy as made.
type agentFleet struct {
	fc     versioned.Interface
	ws     string
	agents []*simAgent
	opens  chan struct{} // bounds concurrent watch opens
	decode string        // how the agents decode their events (pullDecode)

	readPayloads atomic.Bool
	payloadReads atomic.Int64 // payload GETs made
	wouldRead    atomic.Int64 // new source versions seen with readPayloads off
	watching     atomic.Int64
	opened       atomic.Int64 // watches opened
	openErrors   atomic.Int64 // watch opens refused or failed
	lastOpenErr  atomic.Value // the last of them, a string
	openCodesMu  sync.Mutex
	openCodes    map[int32]int64  // watch opens refused or failed, by HTTP status (0: no answer)
	openExamples map[int32]string // the first error of each status
	gone         atomic.Int64     // 410 answers (resume point no longer served)
	payloadErrs  atomic.Int64

	// arrival, when set, is told of each agent's first sight of a new
	// source version.
	arrival atomic.Pointer[func(i int, sourceRV string)]
}

func newAgentFleet(fc versioned.Interface, ws string, n int, name func(int) string, copied string, concurrentOpens int) *agentFleet {
	f := &agentFleet{fc: fc, ws: ws, opens: make(chan struct{}, concurrentOpens), decode: pullDecode()}
	for i := range n {
		c := name(i + 1)
		f.agents = append(f.agents, &simAgent{cluster: c, user: agentUser(c), copied: copied})
	}
	return f
}

// start runs every agent until ctx is done.
func (f *agentFleet) start(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range f.agents {
		wg.Go(func() { f.run(ctx, i) })
	}
	return &wg
}

// allWatchingSince reports whether every agent's watch is current and
// became so after t.
func (f *agentFleet) allWatchingSince(t time.Time) bool {
	if int(f.watching.Load()) != len(f.agents) {
		return false
	}
	for _, a := range f.agents {
		if a.watchingAt.Load() <= t.UnixNano() || !a.watching.Load() {
			return false
		}
	}
	return true
}

// lastWatching is when the last agent's watch became current.
func (f *agentFleet) lastWatching() time.Time {
	var last int64
	for _, a := range f.agents {
		last = max(last, a.watchingAt.Load())
	}
	return time.Unix(0, last)
}

func (f *agentFleet) run(ctx context.Context, i int) {
	a := f.agents[i]
	backoff := 800 * time.Millisecond
	resume := false // the last watch ended normally: resume from lastRV
	for ctx.Err() == nil {
		w, list, err := f.open(ctx, a, resume)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.openErrors.Add(1)
			f.lastOpenErr.Store(err.Error())
			f.countOpenError(err)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				f.gone.Add(1)
				a.mu.Lock()
				a.unavailable = true
				a.mu.Unlock()
			}
			resume = false
			sleep(ctx, backoff+time.Duration(rand.Int64N(int64(backoff))))
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		f.opened.Add(1)
		if !list {
			f.markWatching(a)
		}
		resume = f.consume(ctx, i, w, list)
		a.ends.Add(1)
		if a.watching.Swap(false) {
			f.watching.Add(-1)
		}
		if resume {
			backoff = 800 * time.Millisecond
		}
	}
}

// countOpenError counts err by the HTTP status it carries.
func (f *agentFleet) countOpenError(err error) {
	var code int32
	if s, ok := err.(apierrors.APIStatus); ok {
		code = s.Status().Code
	}
	f.openCodesMu.Lock()
	defer f.openCodesMu.Unlock()
	if f.openCodes == nil {
		f.openCodes, f.openExamples = map[int32]int64{}, map[int32]string{}
	}
	if f.openCodes[code]++; f.openCodes[code] == 1 {
		f.openExamples[code] = err.Error()
	}
}

// openErrorCodes says how many opens were refused or failed with each
// HTTP status so far, and the first error of each ("503: 12 (the first: ...)";
// 0 is no answer).
func (f *agentFleet) openErrorCodes() string {
	f.openCodesMu.Lock()
	defer f.openCodesMu.Unlock()
	codes := slices.Sorted(maps.Keys(f.openCodes))
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d (the first: %s)", c, f.openCodes[c], ends(f.openExamples[c], 240)))
	}
	return strings.Join(parts, ", ")
}

// open starts a's watch: a resume from lastRV, or a watch-list.
func (f *agentFleet) open(ctx context.Context, a *simAgent, resume bool) (watchStream, bool, error) {
	a.mu.Lock()
	rv, unavailable := a.lastRV, a.unavailable
	a.mu.Unlock()
	opts := metav1.ListOptions{FieldSelector: "spec.cluster=" + a.cluster, AllowWatchBookmarks: true}
	list := !resume || rv == "" || unavailable
	if list {
		yes := true
		opts.SendInitialEvents = &yes
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		if !unavailable {
			opts.ResourceVersion = rv
		}
	} else {
		opts.ResourceVersion = rv
	}
	f.opens <- struct{}{}
	defer func() { <-f.opens }()
	w, err := openWatch(ctx, f.fc, f.ws, a.user, opts, f.decode)
	if err == nil && list {
		a.mu.Lock()
		a.unavailable = false
		a.mu.Unlock()
	}
	return w, list, err
}

func (f *agentFleet) markWatching(a *simAgent) {
	a.watchingAt.Store(time.Now().UnixNano())
	if !a.watching.Swap(true) {
		f.watching.Add(1)
	}
}

// consume reads w until it ends; it reports whether the watch ended as a
// server closes a healthy watch (resume from lastRV) rather than with an
// error event. As client-go's stream watcher does, a stream that breaks
// off ends the watch as a close does.
func (f *agentFleet) consume(ctx context.Context, i int, w watchStream, list bool) bool {
	defer w.stop()
	a := f.agents[i]
	for {
		typ, obj, err := w.next()
		if err != nil {
			return ctx.Err() == nil
		}
		if typ == watch.Error {
			if st := apierrors.FromObject(obj); apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
				f.gone.Add(1)
				a.mu.Lock()
				a.unavailable = true
				a.mu.Unlock()
			}
			return false
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			continue
		}
		a.mu.Lock()
		a.lastRV = m.GetResourceVersion()
		a.mu.Unlock()
		if typ == watch.Bookmark {
			if list && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				f.markWatching(a)
			}
			continue
		}
		if row, ok := obj.(*courierv1alpha1.DownstreamCopy); ok && typ != watch.Deleted {
			f.row(ctx, i, row)
		}
	}
}

// row handles a's row as the agent's engine would: a source version its
// copy was not made from needs the payload.
func (f *agentFleet) row(ctx context.Context, i int, row *courierv1alpha1.DownstreamCopy) {
	a := f.agents[i]
	src := row.Spec.Source.ResourceVersion
	a.mu.Lock()
	a.row = row
	fresh := src != "" && src != a.copied
	a.mu.Unlock()
	if !fresh {
		return
	}
	if fn := f.arrival.Load(); fn != nil {
		(*fn)(i, src)
	}
	if f.readPayloads.Load() {
		f.payloadReads.Add(1)
		err := asAgent(f.fc.CourierV1alpha1().RESTClient().Get(), a.user).
			Namespace(row.Namespace).Resource("downstreamcopies").Name(row.Name).SubResource("payload").Do(ctx).Error()
		if err != nil {
			f.payloadErrs.Add(1)
			return
		}
	} else {
		f.wouldRead.Add(1)
	}
	a.mu.Lock()
	a.copied = src
	a.mu.Unlock()
}

// heartbeats reports every agent's row as Synced once per interval, the
// agents spread evenly over it, as the real agent's reporter does with
// everything current (report.Body: the row, its status, the interval);
// workers bound the requests in flight. It returns the number of reports
// sent and refused once ctx is done.
func (f *agentFleet) heartbeats(ctx context.Context, interval time.Duration, workers int) (sent, failed *atomic.Int64, took *latencies) {
	sent, failed, took = &atomic.Int64{}, &atomic.Int64{}, &latencies{}
	jobs := make(chan int, workers)
	for range workers {
		go func() {
			for i := range jobs {
				start := time.Now()
				if err := f.report(ctx, i, interval); err != nil {
					failed.Add(1)
				} else {
					sent.Add(1)
					took.add(time.Since(start))
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		start := time.Now()
		for k := 0; ; k++ {
			due := start.Add(time.Duration(k) * interval / time.Duration(len(f.agents)))
			sleep(ctx, time.Until(due))
			select {
			case jobs <- k % len(f.agents):
			case <-ctx.Done():
				return
			}
		}
	}()
	return sent, failed, took
}

func (f *agentFleet) report(ctx context.Context, i int, interval time.Duration) error {
	a := f.agents[i]
	a.mu.Lock()
	row, copied := a.row, a.copied
	a.mu.Unlock()
	if row == nil {
		return nil
	}
	now := metav1.Now()
	body := agentreport.Body(row, copycontract.Status{Phase: courierapi.CopyPhaseSynced, Message: "copied",
		SyncedResourceVersion: copied, LastSyncTime: &now}, interval)
	return asAgent(f.fc.CourierV1alpha1().RESTClient().Put(), a.user).
		Namespace(row.Namespace).Resource("downstreamcopies").Name(row.Name).SubResource("status").Body(body).Do(ctx).Error()
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// latencies collects request times from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// since returns the p50 and p99 of the times added after the first n, and
// how many there are in all.
func (l *latencies) since(n int) (p50, p99 time.Duration, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	total = len(l.d)
	if n >= total {
		return 0, 0, total
	}
	return fleetsim.Percentile(l.d[n:], 50), fleetsim.Percentile(l.d[n:], 99), total
}
