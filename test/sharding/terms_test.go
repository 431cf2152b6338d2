package sharding

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/courier-dev/courier/pkg/sharding"
)

// interval is one stretch of time a Manager held a bucket, by this
// process's clock: from its OnChange(gained) to its OnChange(lost), or to
// the end of the test when still held.
type interval struct {
	holder     string
	bucket     int
	start, end time.Time
}

// terms records every Manager's held intervals from their OnChange
// callbacks, and samples Owns of every Manager for every bucket every few
// milliseconds: two independent records of "never two at once".
type terms struct {
	mu        sync.Mutex
	open      map[string]map[int]time.Time // holder → bucket → since
	closed    []interval
	managers  map[string]*sharding.Manager
	overlaps  []string // from sampling Owns
	samples   int
	stopSampl chan struct{}
	sampled   sync.WaitGroup
}

func newTerms() *terms {
	return &terms{open: map[string]map[int]time.Time{}, managers: map[string]*sharding.Manager{}, stopSampl: make(chan struct{})}
}

// onChange returns the OnChange callback for holder.
func (r *terms) onChange(holder string) func(gained, lost []int) {
	return func(gained, lost []int) {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.open[holder] == nil {
			r.open[holder] = map[int]time.Time{}
		}
		for _, b := range lost {
			if since, ok := r.open[holder][b]; ok {
				r.closed = append(r.closed, interval{holder: holder, bucket: b, start: since, end: now})
				delete(r.open[holder], b)
			}
		}
		for _, b := range gained {
			r.open[holder][b] = now
		}
	}
}

// gainedAt returns when holder last gained bucket (zero if it holds it not).
func (r *terms) gainedAt(holder string, bucket int) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open[holder][bucket]
}

// watch adds m to the Managers sampled.
func (r *terms) watch(id string, m *sharding.Manager) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.managers[id] = m
}

// sample checks Owns of every Manager for every bucket every 10 ms until
// stop.
func (r *terms) sample(buckets int) {
	r.sampled.Add(1)
	go func() {
		defer r.sampled.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.stopSampl:
				return
			case <-tick.C:
			}
			r.mu.Lock()
			for b := 0; b < buckets; b++ {
				var owners []string
				for id, m := range r.managers {
					if m.Owns(b) {
						owners = append(owners, id)
					}
				}
				if len(owners) > 1 && len(r.overlaps) < 20 {
					r.overlaps = append(r.overlaps, fmt.Sprintf("%s: bucket %d owned by %v", time.Now().Format(time.StampMicro), b, owners))
				}
			}
			r.samples++
			r.mu.Unlock()
		}
	}()
}

// check stops sampling and fails t for any two intervals of one bucket
// held by two Managers that overlap, or any sample with two owners.
func (r *terms) check(t *testing.T) {
	t.Helper()
	close(r.stopSampl)
	r.sampled.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append([]interval(nil), r.closed...)
	now := time.Now()
	for holder, open := range r.open {
		for b, since := range open {
			all = append(all, interval{holder: holder, bucket: b, start: since, end: now})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].bucket != all[j].bucket {
			return all[i].bucket < all[j].bucket
		}
		return all[i].start.Before(all[j].start)
	})
	// Sorted by start, an interval overlaps an earlier one of its bucket
	// exactly when it starts before the latest end seen so far.
	var latest interval
	for i, cur := range all {
		if i > 0 && cur.bucket == latest.bucket && cur.start.Before(latest.end) {
			t.Errorf("bucket %d: %s held it from %s while %s held it until %s", cur.bucket, cur.holder,
				cur.start.Format(time.StampMicro), latest.holder, latest.end.Format(time.StampMicro))
		}
		if i == 0 || cur.bucket != latest.bucket || cur.end.After(latest.end) {
			latest = cur
		}
	}
	for _, o := range r.overlaps {
		t.Error("two owners at once: " + o)
	}
	t.Logf("%d held intervals recorded, %d samples of Owns × 3 Managers × 64 buckets, no overlap found unless reported above", len(all), r.samples)
}
