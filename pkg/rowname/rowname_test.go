package rowname

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestFor(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{"plain", []string{"app", "c1", "Secret", "db"}, "app.c1.secret.db"},
		{"characters a name cannot hold", []string{"FederatedSecret", "fs", "data[tls_crt]"}, "federatedsecret.fs.data-tls-crt"},
		{"labels trimmed of dashes", []string{"-a-", "_b"}, "a.b"},
		{"empty labels dropped", []string{"a", "", "b..c"}, "a.b.c"},
		{"nothing left", []string{"_", "."}, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := For(tc.parts...); got != tc.want {
				t.Errorf("For(%q) = %q, want %q", tc.parts, got, tc.want)
			}
		})
	}

	a, b := For("op", long, "x"), For("op", long, "y")
	for _, n := range []string{a, b} {
		if len(n) > validation.DNS1123SubdomainMaxLength || len(validation.IsDNS1123Subdomain(n)) != 0 {
			t.Errorf("long name %q is not a valid object name: %v", n, validation.IsDNS1123Subdomain(n))
		}
	}
	if a == b {
		t.Error("two long names that differ only past the cut are the same")
	}
	if For("op", long, "x") != a {
		t.Error("the same parts give different names")
	}
}

func TestUnique(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct {
		name  string
		parts []string
		want  string // "" when the name must be the hashed form
	}{
		{"plain", []string{"app", "c1", "secret", "db"}, "app.c1.secret.db"},
		{"dots in the last part stay plain", []string{"app", "c1", "secret", "example.com-tls"}, "app.c1.secret.example.com-tls"},
		{"dot in the HelmOp", []string{"a.b", "c", "secret", "s"}, ""},
		{"dot in the Cluster", []string{"a", "b.c", "secret", "s"}, ""},
		{"upper case", []string{"app", "c1", "secret", "DB"}, ""},
		{"character a name cannot hold", []string{"app", "c1", "secret", "a_b"}, ""},
		{"empty part", []string{"app", "c1", "secret", ""}, ""},
		{"last label looks like a hash", []string{"app", "c1", "secret", "x.0123456789abcdef"}, ""},
		{"too long", []string{"app", "c1", "secret", long}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Unique(tc.parts...)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Fatalf("Unique(%q) = %q is not a valid object name: %v", tc.parts, got, errs)
			}
			if tc.want != "" {
				if got != tc.want {
					t.Errorf("Unique(%q) = %q, want %q", tc.parts, got, tc.want)
				}
				return
			}
			labels := strings.Split(got, ".")
			if !isHashLabel(labels[len(labels)-1]) {
				t.Errorf("Unique(%q) = %q, want the hashed form ending in 16 hex digits", tc.parts, got)
			}
			if Unique(tc.parts...) != got {
				t.Errorf("Unique(%q) is not deterministic", tc.parts)
			}
		})
	}
}

// TestUniqueNeverCollides feeds Unique part lists built to collide under a
// plain join or under sanitising, and checks every name differs.
func TestUniqueNeverCollides(t *testing.T) {
	lists := [][]string{
		{"a.b", "c", "secret", "s"},
		{"a", "b.c", "secret", "s"},
		{"a", "b", "c.secret", "s"},
		{"a", "b", "c", "secret.s"},
		{"a-b", "c", "secret", "s"},
		{"a_b", "c", "secret", "s"},
		{"a", "b", "secret", "s"},
		{"a", "b", "secret", ""},
		{"a", "b", "secret", "x"},
		{"a", "b", "secret", "empty"},
		{"a", "b", "secret", "S"},
	}
	// A plain name that ends like the hashed name of another list.
	hashed := Unique("a.b", "c", "secret", "s")
	i := strings.LastIndex(hashed, ".")
	lists = append(lists, []string{"a-b", "c", "secret", "s" + hashed[i:]})
	seen := map[string][]string{}
	for _, l := range lists {
		n := Unique(l...)
		if prev, ok := seen[n]; ok {
			t.Errorf("%q and %q share the name %q", prev, l, n)
		}
		seen[n] = l
	}
}
