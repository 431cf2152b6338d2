package engine

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The copies of a group are written several at once, all of them, after
// the namespace they need; a fatal outcome stops new writes.
func TestGroupWritesAtOnce(t *testing.T) {
	const n = 10
	group := make([]desiredCopy, n)
	plans := make([]plan, n)
	for i := range group {
		group[i] = desiredCopy{targetNS: "apps", name: string(rune('a' + i))}
		plans[i] = plan{action: actionCreate}
	}
	namespaces := map[string]bool{"apps": false}

	e := New(Config{GroupWriters: 4})
	var (
		inFlight, most atomic.Int32
		mu             sync.Mutex
		order          []int
		release        = make(chan struct{})
	)
	// The writes after the first wait until four are in flight at once
	// (or a second passes): proof that they overlap.
	go func() {
		deadline := time.After(5 * time.Second)
		for most.Load() < 4 {
			select {
			case <-deadline:
				close(release)
				return
			case <-time.After(time.Millisecond):
			}
		}
		close(release)
	}()
	var made []string
	makeNamespace := func(ns string) error {
		if len(order) != 0 {
			t.Errorf("namespace %s made after writes %v", ns, order)
		}
		made = append(made, ns)
		namespaces[ns] = true
		return nil
	}
	err := e.writeGroup(n, namespaces, plans, group, makeNamespace, func(i int) outcome {
		mu.Lock()
		order = append(order, i)
		mu.Unlock()
		cur := inFlight.Add(1)
		for {
			m := most.Load()
			if cur <= m || most.CompareAndSwap(m, cur) {
				break
			}
		}
		<-release
		inFlight.Add(-1)
		return outcome{}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != n || len(made) != 1 {
		t.Errorf("writes %v after namespaces %v: want all %d after the one namespace", order, made, n)
	}
	if got := most.Load(); got != 4 {
		t.Errorf("at most %d writes in flight, want 4 (Config.GroupWriters)", got)
	}
}

func TestGroupWritesStopAtFatal(t *testing.T) {
	const n = 8
	group := make([]desiredCopy, n)
	plans := make([]plan, n)
	for i := range group {
		group[i] = desiredCopy{targetNS: "apps", name: string(rune('a' + i))}
		plans[i] = plan{action: actionUpdate}
	}
	e := New(Config{GroupWriters: 2})
	unreachable := errors.New("connection refused")
	var started atomic.Int32
	noNamespace := func(ns string) error { t.Errorf("namespace %s made, want none", ns); return nil }
	err := e.writeGroup(n, map[string]bool{"apps": true}, plans, group, noNamespace, func(i int) outcome {
		started.Add(1)
		if i == 1 {
			return outcome{fatal: unreachable}
		}
		time.Sleep(10 * time.Millisecond) // i=0 is still in flight when i=1 fails
		return outcome{}
	})
	if !errors.Is(err, unreachable) {
		t.Fatalf("err %v, want the fatal one", err)
	}
	// Positive control: two ran at once; after the failure at most the one
	// slot freed by it could have been taken before the check.
	if s := started.Load(); s < 2 || s > 3 {
		t.Errorf("%d writes started, want 2 or 3 of %d (none after the failure was seen)", s, n)
	}
}

// One writer writes in order, and a fatal outcome stops the writes after
// it.
func TestWriteAtOnceOneAtATime(t *testing.T) {
	unreachable := errors.New("unreachable")
	for _, tc := range []struct {
		name    string
		idx     []int
		writers int
		fatalAt int // index whose write is fatal, -1 for none
		want    []int
	}{
		{name: "one write", idx: []int{3}, writers: 4, fatalAt: -1, want: []int{3}},
		{name: "one writer", idx: []int{0, 1, 2}, writers: 1, fatalAt: -1, want: []int{0, 1, 2}},
		{name: "one writer stops at a fatal write", idx: []int{0, 1, 2}, writers: 1, fatalAt: 1, want: []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int // one at a time: no lock
			err := writeAtOnce(newWriterPool(), tc.idx, tc.writers, func(i int) outcome {
				got = append(got, i)
				if i == tc.fatalAt {
					return outcome{fatal: unreachable}
				}
				return outcome{}
			})
			if (tc.fatalAt >= 0) != errors.Is(err, unreachable) {
				t.Errorf("err = %v, want fatal %v", err, tc.fatalAt >= 0)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("written %v, want %v", got, tc.want)
			}
		})
	}
}

// The goroutines that wrote one group write the next: none is started for
// it once they wait.
func TestWriterPoolReusesItsGoroutines(t *testing.T) {
	pool := newWriterPool()
	const writers = 4
	var ran atomic.Int32
	group := func() {
		t.Helper()
		arrived := make(chan struct{}, writers)
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- writeAtOnce(pool, []int{0, 1, 2, 3}, writers, func(int) outcome {
				ran.Add(1)
				arrived <- struct{}{}
				<-release // all four in flight at once
				return outcome{}
			})
		}()
		for range writers {
			<-arrived
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	group()
	// Positive control: four writes in flight at once took four goroutines.
	if got := pool.started.Load(); got != writers {
		t.Fatalf("%d goroutines started for %d writes in flight at once, want %d", got, writers, writers)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pool.waiting.Load() < writers {
		if time.Now().After(deadline) {
			t.Fatalf("%d writers wait for the next write, want %d", pool.waiting.Load(), writers)
		}
		time.Sleep(time.Millisecond)
	}
	group()
	if got := pool.started.Load(); got != writers {
		t.Errorf("%d goroutines started after a second group, want the first %d again", got, writers)
	}
	if got := ran.Load(); got != 2*writers {
		t.Errorf("%d writes ran, want %d", got, 2*writers)
	}
}
