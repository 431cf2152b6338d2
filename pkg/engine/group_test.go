package engine

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// Copies are grouped by HelmOp and ServiceAccount, in the order each group
// first appears, whether or not a group's copies come one after another;
// copies that are not copyable are left out.
func TestGroupCopies(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ws", Name: "a"}, types.NamespacedName{Namespace: "ws", Name: "b"}
	cp := func(op types.NamespacedName, sa, name string) desiredCopy {
		return desiredCopy{helmOp: op, serviceAccount: sa, name: name, copyable: true}
	}
	skipped := cp(a, "", "skipped")
	skipped.copyable = false
	for _, tc := range []struct {
		name   string
		copies []desiredCopy
		want   [][]string // names per group
	}{
		{name: "none", copies: nil, want: nil},
		{name: "one group", copies: []desiredCopy{cp(a, "", "x"), cp(a, "", "y")}, want: [][]string{{"x", "y"}}},
		{name: "adjacent groups", copies: []desiredCopy{cp(a, "", "x"), cp(b, "", "y"), cp(b, "", "z")}, want: [][]string{{"x"}, {"y", "z"}}},
		{name: "interleaved groups", copies: []desiredCopy{cp(a, "", "x"), cp(b, "", "y"), cp(a, "", "z"), cp(b, "", "w")},
			want: [][]string{{"x", "z"}, {"y", "w"}}},
		{name: "ServiceAccounts of one HelmOp", copies: []desiredCopy{cp(a, "sa1", "x"), cp(a, "sa2", "y"), cp(a, "sa1", "z")},
			want: [][]string{{"x", "z"}, {"y"}}},
		{name: "not copyable", copies: []desiredCopy{skipped, cp(a, "", "x")}, want: [][]string{{"x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]string
			for _, g := range groupCopies(tc.copies) {
				var names []string
				for _, c := range g {
					if c.groupKey() != g[0].groupKey() {
						t.Errorf("group of %v holds %v", g[0].groupKey(), c.groupKey())
					}
					names = append(names, c.name)
				}
				got = append(got, names)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
				t.Errorf("groups %v, want %v", got, tc.want)
			}
		})
	}
}

// Groups that are parts of the copies do not share room: appending to one
// leaves the next as it was.
func TestGroupCopiesAppendStaysInItsGroup(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ws", Name: "a"}, types.NamespacedName{Namespace: "ws", Name: "b"}
	copies := []desiredCopy{{helmOp: a, name: "x", copyable: true}, {helmOp: b, name: "y", copyable: true}}
	groups := groupCopies(copies)
	if len(groups) != 2 {
		t.Fatalf("groups %v, want 2", groups)
	}
	_ = append(groups[0], desiredCopy{helmOp: a, name: "z", copyable: true})
	if groups[1][0].name != "y" || copies[1].name != "y" {
		t.Errorf("appending to the first group changed the second: %v, copies %v", groups[1], copies)
	}
}
