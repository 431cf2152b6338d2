package copycontract

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

func TestSupportedKind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"Secret", "Secret", true},
		{"secret", "Secret", true},
		{"CONFIGMAP", "ConfigMap", true},
		{"configMap", "ConfigMap", true},
		{"Deployment", "", false},
		{"", "", false},
	} {
		if got, ok := SupportedKind(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("SupportedKind(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCopyable(t *testing.T) {
	good := courier.DownstreamCopySpec{Cluster: "c1", Source: courier.CopySource{Kind: "Secret", Name: "s", ResourceVersion: "7"},
		Target: courier.CopyTarget{Namespace: "apps", Name: "s"}}
	for _, tc := range []struct {
		name string
		edit func(*courier.DownstreamCopySpec)
		want bool
	}{
		{"a source that exists", func(*courier.DownstreamCopySpec) {}, true},
		{"kind in any case", func(s *courier.DownstreamCopySpec) { s.Source.Kind = "configmap" }, true},
		{"unsupported kind", func(s *courier.DownstreamCopySpec) { s.Source.Kind = "Deployment" }, false},
		{"no name", func(s *courier.DownstreamCopySpec) { s.Source.Name = "" }, false},
		{"missing source (no resourceVersion)", func(s *courier.DownstreamCopySpec) { s.Source.ResourceVersion = "" }, false},
		{"no destination namespace", func(s *courier.DownstreamCopySpec) { s.Target.Namespace = "" }, false},
		{"destination namespace too long", func(s *courier.DownstreamCopySpec) { s.Target.Namespace = strings.Repeat("n", 64) }, false},
		{"destination namespace not a label", func(s *courier.DownstreamCopySpec) { s.Target.Namespace = "Not_A_Namespace" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := good
			tc.edit(&spec)
			if got := Copyable(spec); got != tc.want {
				t.Errorf("Copyable(%+v) = %v, want %v", spec, got, tc.want)
			}
		})
	}
}

// Invalid, SourceMissing and Copyable split every spec in three, by the
// spec alone: invalid whatever exists upstream, valid with a missing
// source, copyable.
func TestInvalidAndSourceMissing(t *testing.T) {
	spec := func(kind, name, rv, ns string) courier.DownstreamCopySpec {
		return courier.DownstreamCopySpec{Cluster: "c1", Source: courier.CopySource{Kind: kind, Name: name, ResourceVersion: rv},
			Target: courier.CopyTarget{Namespace: ns, Name: name}}
	}
	for _, tc := range []struct {
		name     string
		spec     courier.DownstreamCopySpec
		invalid  string // a part of Invalid's reason; "" for none
		missing  bool
		copyable bool
	}{
		{"copyable", spec("Secret", "s", "7", "apps"), "", false, true},
		{"missing source", spec("ConfigMap", "cm", "", "apps"), "", true, false},
		{"unsupported kind", spec("Deployment", "d", "", "apps"), `kind "Deployment" cannot be copied`, false, false},
		{"unsupported kind with a resourceVersion", spec("Deployment", "d", "7", "apps"), `kind "Deployment" cannot be copied`, false, false},
		{"no name", spec("secret", "", "", "apps"), "Secret entry has no name", false, false},
		{"bad namespace", spec("Secret", "s", "7", "Not_A_Namespace"), `destination namespace "Not_A_Namespace" cannot exist`, false, false},
		{"bad namespace, missing source", spec("Secret", "s", "", ""), `destination namespace "" cannot exist`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := Invalid(tc.spec)
			if (tc.invalid == "") != (why == "") || !strings.Contains(why, tc.invalid) {
				t.Errorf("Invalid = %q, want %q", why, tc.invalid)
			}
			if got := SourceMissing(tc.spec); got != tc.missing {
				t.Errorf("SourceMissing = %v, want %v", got, tc.missing)
			}
			if got := Copyable(tc.spec); got != tc.copyable {
				t.Errorf("Copyable = %v, want %v", got, tc.copyable)
			}
		})
	}
}

func TestOwnerKey(t *testing.T) {
	for _, tc := range []struct {
		spec courier.DownstreamCopySpec
		want string
	}{
		{courier.DownstreamCopySpec{Owner: courier.CopyOwner{Kind: courier.OwnerKindHelmOp, Name: "app"}, HelmOp: "app"}, "app"},
		{courier.DownstreamCopySpec{Owner: courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: "app"}}, "bundle:app"},
		{courier.DownstreamCopySpec{HelmOp: "old"}, "old"},
	} {
		key := OwnerKey("ws", tc.spec)
		if key.Namespace != "ws" || key.Name != tc.want {
			t.Errorf("OwnerKey(%+v) = %v, want ws/%s", tc.spec, key, tc.want)
		}
		if tc.spec.Owner.Kind != "" && OwnerOf(key) != tc.spec.Owner {
			t.Errorf("OwnerOf(%v) = %+v, want %+v", key, OwnerOf(key), tc.spec.Owner)
		}
	}
}

// isDNSLabel agrees with validation.IsDNS1123Label.
func TestIsDNSLabelAgreesWithValidation(t *testing.T) {
	names := []string{"", "a", "0", "-", "a-", "-a", "a-b", "a--b", "A", "aB", "a.b", "a_b", "ü", "a b",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "default", "cattle-fleet-system", "9lives", "x\x00"}
	// Every string of up to three characters from a small alphabet that
	// holds each case of the rule.
	alphabet := []string{"a", "z", "0", "9", "-", "A", ".", "_"}
	var build func(prefix string, n int)
	build = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			build(prefix+c, n-1)
		}
	}
	build("", 3)
	for _, n := range names {
		if got, want := isDNSLabel(n), len(validation.IsDNS1123Label(n)) == 0; got != want {
			t.Errorf("isDNSLabel(%q) = %v, validation says %v", n, got, want)
		}
	}
	t.Logf("%d names checked", len(names))
}
