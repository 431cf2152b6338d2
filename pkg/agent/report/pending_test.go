package report

import (
	"slices"
	"testing"

	"github.com/courier-dev/courier/pkg/copycontract"
)

// The Pending set alone: what is marked is taken once; only the engine's
// changes wake the Reporter, and marking never blocks.
func TestPending(t *testing.T) {
	cases := []struct {
		name     string
		changes  [][]copycontract.StatusChange
		marked   []string
		wantKeys []string
		wantWake bool
	}{
		{name: "nothing marked"},
		{name: "the engine's changes, over HelmOps and calls, deduplicated",
			changes: [][]copycontract.StatusChange{
				{{Rows: []string{"ns/a", "ns/b"}}, {Rows: []string{"ns/c"}}},
				{{Rows: []string{"ns/a"}}},
			},
			wantKeys: []string{"ns/a", "ns/b", "ns/c"}, wantWake: true},
		{name: "a change of leftovers only names no row, but wakes",
			changes: [][]copycontract.StatusChange{{{Leftovers: true}}}, wantKeys: []string{}, wantWake: true},
		{name: "marked again (heartbeat, retry): no wake", marked: []string{"ns/b", "ns/a"}, wantKeys: []string{"ns/a", "ns/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPending()
			for _, ch := range tc.changes {
				p.Changed(ch)
			}
			p.mark(tc.marked)
			got := p.take()
			slices.Sort(got)
			if !slices.Equal(got, tc.wantKeys) && (len(got) != 0 || len(tc.wantKeys) != 0) {
				t.Errorf("taken %q, want %q", got, tc.wantKeys)
			}
			if again := p.take(); len(again) != 0 {
				t.Errorf("taken again %q: take must clear", again)
			}
			woken := false
			select {
			case <-p.wake:
				woken = true
			default:
			}
			if woken != tc.wantWake {
				t.Errorf("woken %t, want %t", woken, tc.wantWake)
			}
		})
	}
}
