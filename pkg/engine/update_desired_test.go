package engine

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// UpdateDesired takes rows that differ from what SetDesired handed over
// only in their source's resourceVersion, and queues just their clusters;
// anything else it refuses, changing nothing, so the view hands over the
// whole HelmOp instead.
func TestUpdateDesired(t *testing.T) {
	pending := courier.CopyPhasePending
	c1db, c2db := row("Secret", "db", "7", pending), rowFor(appOp.Name, "c2", "Secret", "db", "7", pending)
	c1cfg := row("ConfigMap", "settings", "3", pending)
	with := func(r *courier.DownstreamCopy, change func(*courier.DownstreamCopy)) *courier.DownstreamCopy {
		r = r.DeepCopy()
		change(r)
		return r
	}
	newRV := func(rv string) func(*courier.DownstreamCopy) {
		return func(r *courier.DownstreamCopy) { r.Spec.Source.ResourceVersion = rv }
	}
	cases := []struct {
		name       string
		complete   bool
		rows       []*courier.DownstreamCopy
		want       bool
		wantQueued []string
		wantC1RV   string // c1's db copy afterwards
	}{
		{name: "a new source version in one cluster", complete: true, rows: []*courier.DownstreamCopy{with(c1db, newRV("8"))},
			want: true, wantQueued: []string{clusterKey}, wantC1RV: "8"},
		{name: "the same version: nothing queued", complete: true, rows: []*courier.DownstreamCopy{c1db.DeepCopy()},
			want: true, wantQueued: []string{}, wantC1RV: "7"},
		{name: "another field changed: refused", complete: true,
			rows: []*courier.DownstreamCopy{with(c1db, func(r *courier.DownstreamCopy) {
				r.Spec.Target.Namespace = "elsewhere"
				r.Spec.Source.ResourceVersion = "8"
			})},
			want: false, wantQueued: []string{}, wantC1RV: "7"},
		{name: "one row of two refused: neither taken", complete: true,
			rows: []*courier.DownstreamCopy{with(c1db, newRV("8")), rowFor(appOp.Name, "c3", "Secret", "db", "8", pending)},
			want: false, wantQueued: []string{}, wantC1RV: "7"},
		{name: "before DesiredComplete: refused", rows: []*courier.DownstreamCopy{with(c1db, newRV("8"))},
			want: false, wantQueued: []string{}, wantC1RV: "7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, nil)
			env.e.SetDesired(appOp, []*courier.DownstreamCopy{c1db, c2db, c1cfg})
			if tc.complete {
				env.e.DesiredComplete()
			}
			drain(env.e.queue)

			if got := env.e.UpdateDesired(appOp, tc.rows); got != tc.want {
				t.Errorf("UpdateDesired = %v, want %v", got, tc.want)
			}
			if queued := drain(env.e.queue); !slices.Equal(queued, tc.wantQueued) {
				t.Errorf("queued %q, want %q", queued, tc.wantQueued)
			}
			var c1RV string
			for _, c := range env.e.desired.copiesFor(clusterKey) {
				if c.kind == "Secret" {
					c1RV = c.sourceRV
				}
			}
			if c1RV != tc.wantC1RV {
				t.Errorf("c1's copy of db from resourceVersion %q, want %q", c1RV, tc.wantC1RV)
			}
			if got := env.e.desired.copiesFor(fleetNS + "/c2"); len(got) != 1 || got[0].sourceRV != "7" {
				t.Errorf("c2's copies %+v, want db from 7, untouched", got)
			}
		})
	}
	// A HelmOp never handed over is refused.
	env := newEnv(t, nil)
	env.e.DesiredComplete()
	if env.e.UpdateDesired(types.NamespacedName{Namespace: fleetNS, Name: "unknown"}, []*courier.DownstreamCopy{c1db}) {
		t.Error("UpdateDesired took rows of a HelmOp never handed over")
	}
}
