package engine

import (
	"sync"
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
// A copy that creates a namespace not known to exist goes first, one
// after another, so that a namespace is created once; the other copies
// are written Config.GroupWriters at a time. namespaces is only read while
// copies are written at once: execute writes to it only when it creates
// a namespace.
func (e *Engine) writeGroup(n int, namespaces map[string]bool, plans []plan, group []desiredCopy, write func(i int) outcome) error {
	var first, rest []int
	creating := map[string]bool{}
	for i := 0; i < n; i++ {
		ns := group[i].targetNS
		switch {
		case plans[i].action == actionNone:
			write(i) // records the plan's outcome; no request
		case plans[i].action == actionCreate && !namespaces[ns] && !creating[ns]:
			creating[ns] = true
			first = append(first, i)
		default:
			rest = append(rest, i)
		}
	}
	for _, i := range first {
		if o := write(i); o.fatal != nil {
			return o.fatal
		}
	}
	// A namespace whose creation failed is tried again by each of its
	// copies, one after another, as before.
	var together, alone []int
	for _, i := range rest {
		if plans[i].action == actionCreate && !namespaces[group[i].targetNS] {
			alone = append(alone, i)
		} else {
			together = append(together, i)
		}
	}
	if err := writeAtOnce(together, e.cfg.GroupWriters, write); err != nil {
		return err
	}
	for _, i := range alone {
		if o := write(i); o.fatal != nil {
			return o.fatal
		}
	}
	return nil
}

// writeAtOnce runs write for each index, writers at a time, and stops
// starting new ones after a fatal outcome.
func writeAtOnce(idx []int, writers int, write func(i int) outcome) error {
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
		go func() {
			defer func() { <-slots; wg.Done() }()
			if o := write(i); o.fatal != nil {
				mu.Lock()
				if fatal == nil {
					fatal = o.fatal
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return fatal
}
