package fieldcopy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMergePatch(t *testing.T) {
	// Cases from RFC 7386, appendix A, and a nested one.
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`null`, `{"k":{"x":1}}`, `{"k":{"x":1}}`},
	} {
		target, patch := decode(t, tc.target), decode(t, tc.patch)
		targetCopy := decode(t, tc.target)
		got := mergePatch(target, patch)
		if !reflect.DeepEqual(got, decode(t, tc.want)) {
			t.Errorf("mergePatch(%s, %s) = %v, want %s", tc.target, tc.patch, got, tc.want)
		}
		if !reflect.DeepEqual(target, targetCopy) {
			t.Errorf("mergePatch(%s, %s) modified its target", tc.target, tc.patch)
		}
	}
}

func TestGetSet(t *testing.T) {
	obj := decode(t, `{"spec":{"list":[1],"s":"x","m":{"tls.crt":"c"}}}`).(map[string]any)
	if v, found, err := get(obj, mustParsePath("spec.m[tls.crt]")); err != nil || !found || v != "c" {
		t.Errorf("get bracketed key = %v %v %v", v, found, err)
	}
	if _, found, err := get(obj, mustParsePath("spec.missing.x")); err != nil || found {
		t.Errorf("get missing = %v %v", found, err)
	}
	if _, _, err := get(obj, mustParsePath("spec.list.x")); err == nil || !strings.Contains(err.Error(), "spec.list is not an object") {
		t.Errorf("get through a list: %v", err)
	}
	if err := set(obj, mustParsePath("spec.s.x"), "v"); err == nil || !strings.Contains(err.Error(), "spec.s is not an object") {
		t.Errorf("set through a string: %v", err)
	}
	value := map[string]any{"k": "v"}
	if err := set(obj, mustParsePath("spec.new.deep[a.b]"), value); err != nil {
		t.Fatal(err)
	}
	value["k"] = "changed"
	if got, _, _ := get(obj, mustParsePath("spec.new.deep[a.b].k")); got != "v" {
		t.Errorf("set did not copy its value: %v", got)
	}
}

func TestSameValue(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":null}`, `{"a":1}`, true},
		{`{"m":{"creationTimestamp":null,"x":[{"y":null}]}}`, `{"m":{"x":[{}]}}`, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"a":1,"b":0}`, false},
		{`[1,2]`, `[1]`, false},
		{`null`, `{}`, false},
	} {
		if got := sameValue(decode(t, tc.a), decode(t, tc.b)); got != tc.want {
			t.Errorf("sameValue(%s, %s) = %v", tc.a, tc.b, got)
		}
		if got := sameValue(decode(t, tc.b), decode(t, tc.a)); got != tc.want {
			t.Errorf("sameValue(%s, %s) = %v", tc.b, tc.a, got)
		}
	}
}

func TestRowName(t *testing.T) {
	for _, tc := range []struct{ kind, name, dst, want string }{
		{"FederatedSecret", "fs", "spec.template.data", "federatedsecret.fs.spec.template.data"},
		{"Secret", "tls-dst", "data[ca.crt]", "secret.tls-dst.data-ca.crt"},
		{"Secret", "s", "courier.dev/field-copies[3]", "secret.s.courier.dev-field-copies-3"},
		{"X", "y", "spec..a_b", "x.y.spec.a-b"},
	} {
		got := RowName(tc.kind, tc.name, tc.dst)
		if got != tc.want {
			t.Errorf("RowName(%q, %q, %q) = %q, want %q", tc.kind, tc.name, tc.dst, got, tc.want)
		}
		if msgs := validation.IsDNS1123Subdomain(got); len(msgs) > 0 {
			t.Errorf("RowName %q is not a valid name: %v", got, msgs)
		}
	}
	long := RowName("Kind", strings.Repeat("n", 250), "spec.a")
	if msgs := validation.IsDNS1123Subdomain(long); len(msgs) > 0 || long == RowName("Kind", strings.Repeat("n", 250), "spec.b") {
		t.Errorf("long names: %q (len %d) must be at most 253 and distinct", long, len(long))
	}
}

// mustParsePath is rules.ParsePath for paths written in a test; it panics
// on error.
func mustParsePath(s string) rules.Path {
	p, err := rules.ParsePath(s)
	if err != nil {
		panic(err)
	}
	return p
}
