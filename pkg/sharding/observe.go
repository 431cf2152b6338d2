package sharding

import (
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// observation is a Lease as this replica last saw it and when, by this
// replica's clock, it last saw it change.
type observation struct {
	lease  *coordinationv1.Lease
	seenAt time.Time
}

// expired says whether the holder's term is over as this replica sees
// it: no change observed for the Lease's own duration (or fallback when
// it has none). Expiry is never judged from renewTime, which was written
// by another machine's clock: only from when this replica saw the Lease
// change, so clocks need not agree, only run at about the same rate
// (client-go's leader election decides the same way).
func (o observation) expired(now time.Time, fallback time.Duration) bool {
	d := fallback
	if s := o.lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		d = time.Duration(*s) * time.Second
	}
	return !now.Before(o.seenAt.Add(d))
}

// staleFor says whether this replica has seen the Lease unchanged for d
// by its own clock, whatever duration the Lease states: bucket Leases
// are not renewed, so their stated duration says nothing of their holder.
func (o observation) staleFor(now time.Time, d time.Duration) bool {
	return !now.Before(o.seenAt.Add(d))
}

// holder is the Lease's holderIdentity, "" when released.
func (o observation) holder() string {
	if h := o.lease.Spec.HolderIdentity; h != nil {
		return *h
	}
	return ""
}

// observer keeps the observations of one kind of Lease (members or
// buckets), fed by an informer's events. It is safe for concurrent use.
type observer struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byKey map[string]observation // by Lease name
}

func newObserver(c clock.PassiveClock) *observer {
	return &observer{clock: c, byKey: map[string]observation{}}
}

// observe records lease. A Lease seen for the first time counts as
// renewed now (this replica cannot know when it was really renewed, so it
// waits a full duration before calling it expired); a Lease seen again
// with the same resourceVersion (an informer resync) keeps its time.
func (o *observer) observe(lease *coordinationv1.Lease) {
	o.mu.Lock()
	defer o.mu.Unlock()
	old, ok := o.byKey[lease.Name]
	if ok && old.lease.ResourceVersion == lease.ResourceVersion {
		return
	}
	o.byKey[lease.Name] = observation{lease: lease, seenAt: o.clock.Now()}
}

// forget drops a deleted Lease.
func (o *observer) forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.byKey, name)
}

// get returns the observation of the Lease name.
func (o *observer) get(name string) (observation, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs, ok := o.byKey[name]
	return obs, ok
}

// live returns the identities holding a membership Lease that this replica
// has seen renewed within its duration, plus self (always: who may write is
// decided by the bucket Leases alone, so a wrong membership view costs
// hand-overs, never a second writer), sorted.
func (o *observer) live(now time.Time, fallback time.Duration, self string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := map[string]bool{self: true}
	for _, obs := range o.byKey {
		if h := obs.holder(); h != "" && !obs.expired(now, fallback) {
			seen[h] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// handler feeds o from an informer.
func (o *observer) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if l, ok := obj.(*coordinationv1.Lease); ok {
				o.observe(l)
			}
		},
		UpdateFunc: func(_, obj any) {
			if l, ok := obj.(*coordinationv1.Lease); ok {
				o.observe(l)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok {
				o.forget(l.Name)
			}
		},
	}
}
