package engine

import (
	"maps"
	"slices"
	"testing"
	"time"
)

// dc is a desired copy of appOp's Secret name in cluster (c1 or c2),
// made from the source at rv.
func dc(cluster, name, rv string) desiredCopy {
	return desiredCopy{rowKey: rk(cluster, name), helmOp: appOp, kind: "Secret", name: name,
		targetNS: targetNS, sourceRV: rv, copyable: true}
}

// rk is the row key of appOp's Secret name in cluster.
func rk(cluster, name string) string { return fleetNS + "/app." + cluster + ".secret." + name }

// inClusters groups copies by cluster key as desiredCopies does; cluster
// names the copies' Cluster, in order.
func inClusters(cluster []string, copies ...desiredCopy) map[string][]desiredCopy {
	out := map[string][]desiredCopy{}
	for i, c := range copies {
		key := fleetNS + "/" + cluster[i]
		out[key] = append(out[key], c)
	}
	for _, cs := range out {
		sortCopies(cs)
	}
	return out
}

// The desired set alone: one HelmOp's copies set step by step, and what
// each step changed and left known.
func TestDesiredSet(t *testing.T) {
	t0, t1 := fixedNow, fixedNow.Add(time.Minute)
	c1, c2 := fleetNS+"/c1", fleetNS+"/c2"
	steps := []struct {
		name         string
		complete     bool // markComplete before this step
		next         map[string][]desiredCopy
		now          time.Time
		wantChanged  []string
		wantGone     []string
		wantUnused   int
		wantComplete bool
		wantInitial  []string // row keys among c1's db and tls and c2's db
		wantObserved map[string]time.Time
		wantWantedBy []string // Clusters wanting db
	}{
		{name: "before DesiredComplete: rows are initial", next: inClusters([]string{"c1", "c2"}, dc("c1", "db", "1"), dc("c2", "db", "1")), now: t0,
			wantChanged: []string{c1, c2}, wantInitial: []string{rk("c1", "db"), rk("c2", "db")},
			wantObserved: map[string]time.Time{rk("c1", "db"): t0, rk("c2", "db"): t0}, wantWantedBy: []string{c1, c2}},
		{name: "after: a new row is not initial; only a new source version is seen anew", complete: true,
			next: inClusters([]string{"c1", "c2", "c1"}, dc("c1", "db", "2"), dc("c2", "db", "1"), dc("c1", "tls", "1")), now: t1,
			wantChanged: []string{c1}, wantComplete: true, wantInitial: []string{rk("c1", "db"), rk("c2", "db")},
			wantObserved: map[string]time.Time{rk("c1", "db"): t1, rk("c2", "db"): t0, rk("c1", "tls"): t1}, wantWantedBy: []string{c1, c2}},
		{name: "a Cluster's rows go", complete: true, next: inClusters([]string{"c1", "c1"}, dc("c1", "db", "2"), dc("c1", "tls", "1")), now: t1,
			wantChanged: []string{c2}, wantGone: []string{rk("c2", "db")}, wantComplete: true, wantInitial: []string{rk("c1", "db"), rk("c2", "db")},
			wantObserved: map[string]time.Time{rk("c1", "db"): t1, rk("c1", "tls"): t1}, wantWantedBy: []string{c1}},
		{name: "the HelmOp goes: its sources are unused", complete: true, now: t1,
			wantChanged: []string{c1}, wantGone: []string{rk("c1", "db"), rk("c1", "tls")}, wantUnused: 2,
			wantComplete: true, wantInitial: []string{rk("c1", "db"), rk("c2", "db")}, wantObserved: map[string]time.Time{}},
	}
	d := newDesiredSet()
	for _, s := range steps {
		if s.complete {
			d.markComplete()
		}
		h := d.set(appOp, s.next, s.now)
		if !slices.Equal(h.changed, s.wantChanged) || !slices.Equal(h.gone, s.wantGone) || len(h.unused) != s.wantUnused || h.complete != s.wantComplete {
			t.Errorf("%s: handover %+v, want changed %v, gone %v, %d unused, complete %t", s.name, h, s.wantChanged, s.wantGone, s.wantUnused, s.wantComplete)
		}
		var initial []string
		for _, key := range []string{rk("c1", "db"), rk("c1", "tls"), rk("c2", "db")} {
			if d.existedAtStart(key) {
				initial = append(initial, key)
			}
		}
		if !slices.Equal(initial, s.wantInitial) {
			t.Errorf("%s: initial %v, want %v", s.name, initial, s.wantInitial)
		}
		if !maps.Equal(d.observedAt, s.wantObserved) {
			t.Errorf("%s: observed %v, want %v", s.name, d.observedAt, s.wantObserved)
		}
		if got := slices.Sorted(slices.Values(d.wantedByClusters(copyID(appOp, "Secret", targetNS, "db")))); !slices.Equal(got, s.wantWantedBy) {
			t.Errorf("%s: db wanted by %v, want %v", s.name, got, s.wantWantedBy)
		}
		if d.wanted(c1, copyID(appOp, "Secret", targetNS, "db")) != slices.Contains(s.wantWantedBy, c1) {
			t.Errorf("%s: wanted(c1, db) disagrees with wantedByClusters", s.name)
		}
		for _, key := range []string{c1, c2} {
			if got := d.copiesFor(key); !slices.Equal(got, s.next[key]) {
				t.Errorf("%s: copies for %s %v, want %v", s.name, key, got, s.next[key])
			}
		}
	}
}

// update takes new source versions of copies held, and nothing else.
func TestDesiredSetUpdate(t *testing.T) {
	c1 := fleetNS + "/c1"
	changedTarget := dc("c1", "db", "2")
	changedTarget.targetNS = "elsewhere"
	cases := []struct {
		name        string
		complete    bool
		updates     map[string][]desiredCopy
		wantOK      bool
		wantChanged map[string][]string
		wantDB      string // db's source version afterwards
	}{
		{"before DesiredComplete: refused", false, inClusters([]string{"c1"}, dc("c1", "db", "2")), false, nil, "1"},
		{"a new source version", true, inClusters([]string{"c1"}, dc("c1", "db", "2")), true, map[string][]string{c1: {rk("c1", "db")}}, "2"},
		{"the same version: nothing changed", true, inClusters([]string{"c1"}, dc("c1", "db", "1")), true, map[string][]string{}, "1"},
		{"a row not held: refused", true, inClusters([]string{"c1"}, dc("c1", "new", "2")), false, nil, "1"},
		{"another field changed: refused", true, inClusters([]string{"c1"}, changedTarget), false, nil, "1"},
		{"a Cluster not held: refused", true, inClusters([]string{"c2"}, dc("c2", "db", "2")), false, nil, "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDesiredSet()
			d.set(appOp, inClusters([]string{"c1", "c1"}, dc("c1", "db", "1"), dc("c1", "tls", "1")), fixedNow)
			if tc.complete {
				d.markComplete()
			}
			clear(d.observedAt)
			later := fixedNow.Add(time.Minute)
			changed, ok := d.update(appOp, tc.updates, later)
			if ok != tc.wantOK || (tc.wantChanged != nil && !maps.EqualFunc(changed, tc.wantChanged, slices.Equal)) {
				t.Errorf("update: %v %t, want %v %t", changed, ok, tc.wantChanged, tc.wantOK)
			}
			if got := d.copiesFor(c1)[0].sourceRV; got != tc.wantDB {
				t.Errorf("db's source version %s, want %s", got, tc.wantDB)
			}
			if _, seen := d.takeObservedAt(rk("c1", "db")); seen != (len(tc.wantChanged) > 0) {
				t.Errorf("db's new version seen: %t, want %t", seen, len(tc.wantChanged) > 0)
			}
			if _, again := d.takeObservedAt(rk("c1", "db")); again {
				t.Error("takeObservedAt returned a time twice")
			}
		})
	}
}

// A row stops being initial once a pass has looked at it; marking
// complete is reported once.
func TestDesiredSetInitialAndComplete(t *testing.T) {
	d := newDesiredSet()
	d.set(appOp, inClusters([]string{"c1"}, dc("c1", "db", "1")), fixedNow)
	steps := []struct {
		name        string
		do          func() bool
		wantResult  bool
		wantInitial bool
		wantDone    bool
	}{
		{"handed over before the start", func() bool { return false }, false, true, false},
		{"the first markComplete", d.markComplete, true, true, true},
		{"the second", d.markComplete, false, true, true},
		{"a pass looked at it", func() bool { d.lookedAt(rk("c1", "db")); return false }, false, false, true},
	}
	for _, s := range steps {
		if got := s.do(); got != s.wantResult {
			t.Errorf("%s: %t, want %t", s.name, got, s.wantResult)
		}
		if got := d.existedAtStart(rk("c1", "db")); got != s.wantInitial {
			t.Errorf("%s: initial %t, want %t", s.name, got, s.wantInitial)
		}
		if got := d.isComplete(); got != s.wantDone {
			t.Errorf("%s: complete %t, want %t", s.name, got, s.wantDone)
		}
	}
}
