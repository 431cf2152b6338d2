package rules

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Value
		wantErr string
	}{
		{in: "secret:cloud-secret-master:data",
			want: Value{Source: &Source{Resource: "secret", Name: "cloud-secret-master", Path: Path{"data"}}}},
		{in: "deployments.v1.apps:web:spec",
			want: Value{Source: &Source{Resource: "deployments.v1.apps", Name: "web", Path: Path{"spec"}}}},
		{in: "secret:other/tls-src:data[tls.crt]",
			want: Value{Source: &Source{Resource: "secret", Namespace: "other", Name: "tls-src", Path: Path{"data", "tls.crt"}}}},
		{in: "configmap:cm:data[a:b]",
			want: Value{Source: &Source{Resource: "configmap", Name: "cm", Path: Path{"data", "a:b"}}}},
		{in: `json:{"a": 1}`, want: Value{Literal: []byte(`{"a":1}`)}},
		{in: `json:"x"`, want: Value{Literal: []byte(`"x"`)}},
		{in: `json:null`, want: Value{Literal: []byte(`null`)}},
		{in: `json:`, wantErr: "not valid"},
		{in: `json:{"a":`, wantErr: "not valid"},
		{in: `json:1 2`, wantErr: "not valid"},
		{in: "secret:name", wantErr: "neither RESOURCE:INSTANCE:SRC-PATH nor json:JSON"},
		{in: "", wantErr: "neither"},
		{in: ":name:data", wantErr: "empty RESOURCE"},
		{in: "secret::data", wantErr: "empty object name"},
		{in: "secret:ns/:data", wantErr: "empty object name"},
		{in: "secret:Bad_NS/x:data", wantErr: "namespace \"Bad_NS\""},
		{in: "secret:a/b/c:data", wantErr: "object name \"b/c\""},
		{in: "secret:x:", wantErr: "SRC-PATH: empty path"},
		{in: "secret:x:data[tls.crt", wantErr: "never closed"},
		{in: "se cret:x:data", wantErr: "not a resource name"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseValue(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseValue(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseValue(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// FuzzParseValue checks that ParseValue never panics, that a parsed value
// is exactly one of source and literal, and that its canonical text parses
// back to the same value.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"secret:cloud-secret-master:data", "secret:ns/x:data[tls.crt]", `json:{"a":1}`, "json:", "a::b", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseValue(s)
		if err != nil {
			return
		}
		if (v.Source == nil) == (v.Literal == nil) {
			t.Fatalf("ParseValue(%q) = %+v: want exactly one of source and literal", s, v)
		}
		text := v.String()
		back, err := ParseValue(text)
		if err != nil {
			t.Fatalf("canonical text %q of %q does not parse: %v", text, s, err)
		}
		if !reflect.DeepEqual(back, v) {
			t.Fatalf("round trip: %q -> %+v -> %q -> %+v", s, v, text, back)
		}
	})
}
