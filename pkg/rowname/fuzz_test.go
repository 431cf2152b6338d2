package rowname

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzUnique checks the promise of Unique: every name is a DNS subdomain,
// the same parts always give the same name, and two different part lists
// never share a name. The second list is the first with its dots moved
// between parts (the collision docs/design.md#the-downstreamcopy-view names) or a different list
// altogether.
func FuzzUnique(f *testing.F) {
	f.Add("a.b", "c", "secret", "s", "a", "b.c", "secret", "s")
	f.Add("app", "c1", "secret", "example.com-tls", "app", "c1.secret", "example", "com-tls")
	f.Add("app", "c1", "secret", "0123456789abcdef", "app", "c1", "secret", "x.0123456789abcdef")
	f.Add(strings.Repeat("h", 253), "c", "configmap", "n", strings.Repeat("h", 252), "c", "configmap", "n")
	f.Add("", "", "", "", "x", "", "", "")
	f.Add("A", "b", "c", "d", "a", "b", "c", "d")
	f.Fuzz(func(t *testing.T, h1, c1, k1, n1, h2, c2, k2, n2 string) {
		a := []string{h1, c1, k1, n1}
		b := []string{h2, c2, k2, n2}
		na, nb := Unique(a...), Unique(b...)
		for _, n := range []string{na, nb} {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("Unique(%q) = %q, not a DNS subdomain: %v", a, n, errs)
			}
		}
		if again := Unique(a...); again != na {
			t.Fatalf("Unique(%q) not deterministic: %q then %q", a, na, again)
		}
		same := h1 == h2 && c1 == c2 && k1 == k2 && n1 == n2
		if !same && na == nb {
			t.Fatalf("Unique(%q) = Unique(%q) = %q", a, b, na)
		}
		// The same characters with the first dot moved one part to the
		// right: the collision a plain join would make.
		if i := strings.IndexByte(h1, '.'); i >= 0 {
			moved := []string{h1[:i], h1[i+1:] + "." + c1, k1, n1}
			if m := Unique(moved...); m == na {
				t.Fatalf("Unique(%q) = Unique(%q) = %q", a, moved, m)
			}
		}
	})
}

// FuzzFor checks that For always returns a DNS subdomain, the same for the
// same parts.
func FuzzFor(f *testing.F) {
	f.Add("configmap", "app", "data.key")
	f.Add("", "..", "--")
	f.Add("ÄÖÜ", strings.Repeat("x.", 200), "\xff")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		n := For(a, b, c)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Fatalf("For(%q, %q, %q) = %q, not a DNS subdomain: %v", a, b, c, n, errs)
		}
		if again := For(a, b, c); again != n {
			t.Fatalf("For not deterministic: %q then %q", n, again)
		}
	})
}
