package copycontract

import (
	"strings"
	"testing"

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
