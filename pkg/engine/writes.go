package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultGroupWriters is how many copies of one group are written at once
// unless Config.GroupWriters says otherwise. A pass over a cluster used to
// write its copies one after another, so a Cluster's ten copies cost ten
// round trips end to end; a few at once keep the pass short without
// exceeding the cluster's request limit (downstream.QPS, Burst), which
// every write still draws on.
const DefaultGroupWriters = 4

// writeGroup runs write for the copies of a group whose plans need a
// write, and returns the first fatal error (the cluster is unreachable):
// once one is seen, no further write starts, and the copies not started
// keep an empty outcome (not reached).
//
// Each destination namespace not known to exist is made first, once
// (makeNamespace, which records it in namespaces or returns a fatal
// error); then the copies are written Config.GroupWriters at a time, all
// of them, so a new Cluster's ten copies cost the namespace and three
// round trips, not the namespace with the first copy and then three more.
// A copy whose namespace could not be made is written alone, after the
// others: execute tries the namespace again and reports why it failed.
// namespaces is only read while copies are written at once: execute
// writes to it only when it creates a namespace.
func (e *Engine) writeGroup(n int, namespaces map[string]bool, plans []plan, group []desiredCopy,
	makeNamespace func(ns string) error, write func(i int) outcome) error {
	var rest []int
	var missing []string
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		ns := group[i].targetNS
		if plans[i].action == actionNone {
			write(i) // records the plan's outcome; no request
			continue
		}
		if plans[i].action == actionCreate && !namespaces[ns] && !seen[ns] {
			seen[ns] = true
			missing = append(missing, ns)
		}
		rest = append(rest, i)
	}
	for _, ns := range missing {
		if err := makeNamespace(ns); err != nil {
			return err
		}
	}
	var together, alone []int
	for _, i := range rest {
		if plans[i].action == actionCreate && !namespaces[group[i].targetNS] {
			alone = append(alone, i)
		} else {
			together = append(together, i)
		}
	}
	if err := writeAtOnce(e.writers, together, e.cfg.GroupWriters, write); err != nil {
		return err
	}
	for _, i := range alone {
		if o := write(i); o.fatal != nil {
			return o.fatal
		}
	}
	return nil
}

// writeAtOnce runs write for each index, writers at a time, on goroutines
// of pool, and stops starting new ones after a fatal outcome.
func writeAtOnce(pool *writerPool, idx []int, writers int, write func(i int) outcome) error {
	if len(idx) == 1 || writers <= 1 {
		// One at a time: on the worker's own goroutine, whose stack has
		// grown already (after one change of one source, most passes
		// write a single copy).
		for _, i := range idx {
			if o := write(i); o.fatal != nil {
				return o.fatal
			}
		}
		return nil
	}
	var (
		mu    sync.Mutex
		fatal error
		wg    sync.WaitGroup
		slots = make(chan struct{}, max(writers, 1))
	)
	for _, i := range idx {
		slots <- struct{}{} // then look: a write that just ended may have failed
		mu.Lock()
		stop := fatal != nil
		mu.Unlock()
		if stop {
			<-slots
			break
		}
		wg.Add(1)
		pool.run(func() {
			defer func() { <-slots; wg.Done() }()
			if o := write(i); o.fatal != nil {
				mu.Lock()
				if fatal == nil {
					fatal = o.fatal
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return fatal
}

// writerIdle is how long a writer goroutine waits for its next write
// before it ends.
const writerIdle = 30 * time.Second

// A writerPool runs writes on goroutines that outlive one group. A write
// goes down client-go's request path, HTTP/2 and TLS, and its goroutine's
// stack grows to fit; a new goroutine for every write grew a new stack
// every time: runtime.newstack and copystack were 6 % of the replica's CPU
// in a change of every source at N=1,000 (docs/benchmarks.md). A goroutine
// whose write ended takes the next one handed to the pool, and ends after
// writerIdle without one, so an idle engine holds none.
type writerPool struct {
	tasks chan func() // unbuffered: a send succeeds only to a waiting writer
	// started counts the goroutines started and waiting those waiting for
	// a write, for tests.
	started, waiting atomic.Int64
}

func newWriterPool() *writerPool { return &writerPool{tasks: make(chan func())} }

// run runs f on a waiting writer, or on a new one when none waits.
func (p *writerPool) run(f func()) {
	select {
	case p.tasks <- f:
	default:
		p.started.Add(1)
		go p.loop(f)
	}
}

// loop runs f, then every write handed to it, until it waited writerIdle
// for one.
func (p *writerPool) loop(f func()) {
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(writerIdle)
		p.waiting.Add(1)
		select {
		case f = <-p.tasks:
			p.waiting.Add(-1)
		case <-idle.C:
			p.waiting.Add(-1)
			return
		}
	}
}
