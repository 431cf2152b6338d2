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
