package rules

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Path
		wantErr string // substring; empty means success
	}{
		{in: "spec", want: Path{"spec"}},
		{in: "spec.template.data", want: Path{"spec", "template", "data"}},
		{in: "data[tls.crt]", want: Path{"data", "tls.crt"}},
		{in: "a.b[c.d].e", want: Path{"a", "b", "c.d", "e"}},
		{in: "[x.y].z", want: Path{"x.y", "z"}},
		{in: "a[b][c.d]", want: Path{"a", "b", "c.d"}},
		{in: "a[b:c/d e]", want: Path{"a", "b:c/d e"}},
		{in: "metadata.labels.app/name", want: Path{"metadata", "labels", "app/name"}},
		{in: "", wantErr: "empty path"},
		{in: ".a", wantErr: "empty segment at offset 0"},
		{in: "a..b", wantErr: "empty segment at offset 2"},
		{in: "a.", wantErr: "ends with"},
		{in: "a[b", wantErr: "never closed"},
		{in: "a]b", wantErr: "no matching"},
		{in: "a[]", wantErr: "empty key"},
		{in: "a[[b]]", wantErr: "inside brackets"},
		{in: "a.[b]", wantErr: "write a[b] rather than a.[b]"},
		{in: "a[b]c", wantErr: "after a bracketed key"},
		{in: "a[b]]", wantErr: "no matching"},
		// The limit: MaxPathSegments segments parse, one more does not.
		{in: strings.Repeat("a.", MaxPathSegments-1) + "a", want: Path(strings.Split(strings.Repeat("a.", MaxPathSegments-1)+"a", "."))},
		{in: strings.Repeat("a.", MaxPathSegments) + "a", wantErr: "path has 101 segments; at most 100"},
		{in: strings.Repeat("[a.b]", MaxPathSegments+1), wantErr: "path has 101 segments; at most 100"},
		{in: "data." + strings.Repeat("a.", 5000) + "a", wantErr: "path has 5002 segments; at most 100"},
	} {
		name := tc.in
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		t.Run(name, func(t *testing.T) {
			got, err := ParsePath(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParsePath(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParsePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestPathString(t *testing.T) {
	for _, tc := range []struct {
		in   Path
		want string
	}{
		{Path{"spec", "template", "data"}, "spec.template.data"},
		{Path{"data", "tls.crt"}, "data[tls.crt]"},
		{Path{"x.y", "z"}, "[x.y].z"},
		{Path{"a", "b.c", "d.e", "f"}, "a[b.c][d.e].f"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%q.String() = %q, want %q", []string(tc.in), got, tc.want)
		}
		back, err := ParsePath(tc.want)
		if err != nil || !back.Equal(tc.in) {
			t.Errorf("ParsePath(%q) = %q, %v; want %q", tc.want, back, err, tc.in)
		}
	}
}

// FuzzParsePath checks that ParsePath never panics, never returns an empty
// path or segment or a path over MaxPathSegments, and that the canonical
// text of what it returns parses back to the same path.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"spec.template.data", "data[tls.crt]", "a.b[c.d].e", "[x]", "a..b", "a[b", "a]",
		strings.Repeat("a.", MaxPathSegments-1) + "a", strings.Repeat("a.", MaxPathSegments) + "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			if p != nil {
				t.Fatalf("ParsePath(%q) returned %q with error %v", s, p, err)
			}
			return
		}
		if len(p) == 0 || len(p) > MaxPathSegments {
			t.Fatalf("ParsePath(%q) returned a path of %d segments", s, len(p))
		}
		for _, seg := range p {
			if seg == "" || strings.ContainsAny(seg, "[]") {
				t.Fatalf("ParsePath(%q) returned segment %q", s, seg)
			}
		}
		if !strings.ContainsAny(s, "[]") && strings.Join(p, ".") != s {
			t.Fatalf("ParsePath(%q) = %q does not join back to the input", s, p)
		}
		text := p.String()
		back, err := ParsePath(text)
		if err != nil {
			t.Fatalf("ParsePath(%q) failed on the canonical text %q of %q: %v", text, text, s, err)
		}
		if !back.Equal(p) {
			t.Fatalf("round trip: %q -> %q -> %q -> %q", s, p, text, back)
		}
	})
}
