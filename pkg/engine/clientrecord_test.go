package engine

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/downstream"
)

// The client record alone: each answer holds for the client it was
// learnt with, and a Cluster forgotten starts afresh.
func TestClientRecord(t *testing.T) {
	c1, c2 := fleetNS+"/c1", fleetNS+"/c2"
	first := &downstream.Client{Key: c1, Config: &rest.Config{Host: downHost}}
	second := &downstream.Client{Key: c1, Config: &rest.Config{Host: downHost}} // a new kubeconfig, same server
	twin := &downstream.Client{Key: c2, Config: &rest.Config{Host: downHost}}
	elsewhere := &downstream.Client{Key: c2, Config: &rest.Config{Host: "https://other.example:6443"}}
	type answers struct{ passed, legacy, twinReaches bool }
	steps := []struct {
		name string
		do   func(r *clientRecord)
		ask  *downstream.Client
		want answers
	}{
		{"nothing learnt", func(*clientRecord) {}, first, answers{false, true, false}},
		{"a pass ended", func(r *clientRecord) { r.passEnded(first) }, first, answers{true, true, false}},
		{"a new client has not passed", func(*clientRecord) {}, second, answers{false, true, false}},
		{"the legacy look done", func(r *clientRecord) { r.legacySwept(c1, first) }, first, answers{true, false, false}},
		{"... but not for a new client", func(*clientRecord) {}, second, answers{false, true, false}},
		{"a twin reaches the same server", func(r *clientRecord) { r.setServer(c2, twin) }, first, answers{true, false, true}},
		{"the twin moved elsewhere", func(r *clientRecord) { r.setServer(c2, elsewhere) }, first, answers{true, false, false}},
		{"no client, no server recorded", func(r *clientRecord) { r.setServer(c2, nil); r.setServer(c2, &downstream.Client{Key: c2}) }, first, answers{true, false, false}},
		{"back on the same server", func(r *clientRecord) { r.setServer(c2, twin) }, first, answers{true, false, true}},
		{"c1 forgotten: c2 stays", func(r *clientRecord) { r.forget(c1) }, first, answers{false, true, true}},
		{"c2 forgotten", func(r *clientRecord) { r.forget(c2) }, first, answers{false, true, false}},
	}
	r := newClientRecord()
	for _, s := range steps {
		s.do(r)
		got := answers{
			passed:      r.passedBefore(s.ask),
			legacy:      r.needsLegacySweep(c1, s.ask),
			twinReaches: r.reachesServer(downHost, []string{c2}),
		}
		if got != s.want {
			t.Errorf("%s: %+v, want %+v", s.name, got, s.want)
		}
	}
}
