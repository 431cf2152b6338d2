package engine

import "testing"

// The taken names alone: what the last live read found, per Cluster, row
// and destination namespace.
func TestTakenNames(t *testing.T) {
	c1, c2 := fleetNS+"/c1", fleetNS+"/c2"
	db := dc("c1", "db", "1")
	moved := db
	moved.targetNS = "elsewhere"
	type ask struct {
		cluster string
		c       desiredCopy
		want    bool
	}
	steps := []struct {
		name string
		do   func(t *takenNames)
		asks []ask
	}{
		{"nothing observed", func(*takenNames) {}, []ask{{c1, db, false}}},
		{"found taken in c1", func(t *takenNames) { t.observe(c1, db, true) },
			[]ask{{c1, db, true}, {c2, db, false}, {c1, moved, false}}},
		{"found taken in c2 too", func(t *takenNames) { t.observe(c2, db, true) }, []ask{{c1, db, true}, {c2, db, true}}},
		{"found free in c1", func(t *takenNames) { t.observe(c1, db, false) }, []ask{{c1, db, false}, {c2, db, true}}},
		{"taken again, then the row no longer desired in c1", func(t *takenNames) { t.observe(c1, db, true); t.retain(c1, nil) },
			[]ask{{c1, db, false}, {c2, db, true}}},
		{"c2 still desires it", func(t *takenNames) { t.retain(c2, []desiredCopy{db}) }, []ask{{c2, db, true}}},
		{"c2 forgotten", func(t *takenNames) { t.forget(c2) }, []ask{{c2, db, false}}},
	}
	tn := newTakenNames()
	for _, s := range steps {
		s.do(tn)
		for _, a := range s.asks {
			if got := tn.taken(a.cluster, a.c); got != a.want {
				t.Errorf("%s: taken(%s, %s in %s) = %t, want %t", s.name, a.cluster, a.c.rowKey, a.c.targetNS, got, a.want)
			}
		}
	}
	if len(tn.byCluster) != 0 {
		t.Errorf("entries left after every Cluster was emptied or forgotten: %v", tn.byCluster)
	}
}
