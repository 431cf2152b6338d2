package rules

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// summary is what a test compares of a rule: origin, destination, mode,
// value text, and the error's text (empty when valid).
type summary struct {
	Origin, Dst string
	Mode        courier.FieldCopyMode
	Value, Err  string
}

func summarize(rules []Rule) []summary {
	out := make([]summary, 0, len(rules))
	for _, r := range rules {
		s := summary{Origin: r.Origin, Dst: r.DestinationName(), Mode: r.Mode}
		if r.Err != nil {
			s.Err = r.Err.Error()
		} else {
			s.Value = r.Value.String()
		}
		out = append(out, s)
	}
	return out
}

func TestParseAnnotations(t *testing.T) {
	const (
		replace = courier.FieldCopyModeReplace
		merge   = courier.FieldCopyModeMerge
	)
	// deep is the chaos catalogue's path 5,000 levels deep; deepest is as
	// deep as a path may be (the positive control).
	deep := "data." + strings.Repeat("a.", 5000) + "a"
	deepest := "data." + strings.Repeat("a.", MaxPathSegments-2) + "a"
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want []summary // Err compared by substring
	}{
		{name: "none", ann: map[string]string{"other": "x"}, want: []summary{}},
		{name: "k8s-copier example", ann: map[string]string{
			"k8s-copier.fig.org/replace-spec.template.data": "secret:cloud-secret-master:data",
			"unrelated": "x",
		}, want: []summary{
			{Origin: "k8s-copier.fig.org/replace-spec.template.data", Dst: "spec.template.data", Mode: replace, Value: "secret:cloud-secret-master:data"},
		}},
		{name: "several independent rules, one bad", ann: map[string]string{
			"k8s-copier.fig.org/replace-spec.a": `json:{"a":1}`,
			"k8s-copier.fig.org/merge-spec.b":   "configmap:ns/cm:data",
			"k8s-copier.fig.org/replace-spec.c": "nope",
		}, want: []summary{
			{Origin: "k8s-copier.fig.org/replace-spec.a", Dst: "spec.a", Mode: replace, Value: `json:{"a":1}`},
			{Origin: "k8s-copier.fig.org/merge-spec.b", Dst: "spec.b", Mode: merge, Value: "configmap:ns/cm:data"},
			{Origin: "k8s-copier.fig.org/replace-spec.c", Dst: "spec.c", Mode: replace, Err: "neither"},
		}},
		{name: "field-copies list", ann: map[string]string{
			FieldCopiesAnnotation: `[{"to":"data[ca.crt]","from":"secret:tls-src:data[ca.crt]"},
				{"to":"spec.x","from":"json:2","mode":"merge"},
				{"to":"spec.y"},
				{"from":"json:1"},
				{"to":"spec.z","from":"json:1","mode":"append"},
				{"to":"spec.w","from":"json:1","extra":true},
				{"to":"spec..v","from":"json:1"},
				3]`,
		}, want: []summary{
			{Origin: "courier.dev/field-copies[3]", Dst: "courier.dev/field-copies[3]", Mode: replace, Err: `missing "to"`},
			{Origin: "courier.dev/field-copies[7]", Dst: "courier.dev/field-copies[7]", Mode: replace, Err: "not an object"},
			{Origin: "courier.dev/field-copies[0]", Dst: "data[ca.crt]", Mode: replace, Value: "secret:tls-src:data[ca.crt]"},
			{Origin: "courier.dev/field-copies[6]", Dst: "spec..v", Mode: replace, Err: "empty segment"},
			{Origin: "courier.dev/field-copies[5]", Dst: "spec.w", Mode: replace, Err: "unknown field"},
			{Origin: "courier.dev/field-copies[1]", Dst: "spec.x", Mode: merge, Value: "json:2"},
			{Origin: "courier.dev/field-copies[2]", Dst: "spec.y", Mode: replace, Err: `missing "from"`},
			{Origin: "courier.dev/field-copies[4]", Dst: "spec.z", Mode: replace, Err: `mode "append"`},
		}},
		{name: "field-copies not a list", ann: map[string]string{
			FieldCopiesAnnotation:               `{"to":"a"}`,
			"k8s-copier.fig.org/replace-spec.a": "secret:s:data",
		}, want: []summary{
			{Origin: FieldCopiesAnnotation, Dst: FieldCopiesAnnotation, Mode: replace, Err: "not a JSON list"},
			{Origin: "k8s-copier.fig.org/replace-spec.a", Dst: "spec.a", Mode: replace, Value: "secret:s:data"},
		}},
		{name: "same destination twice", ann: map[string]string{
			"k8s-copier.fig.org/replace-data.x": "secret:a:data",
			"k8s-copier.fig.org/merge-data.x":   "secret:b:data",
			FieldCopiesAnnotation:               `[{"to":"data.y","from":"json:1"}]`,
		}, want: []summary{
			{Origin: "k8s-copier.fig.org/merge-data.x", Dst: "data.x", Mode: merge, Err: "also written by k8s-copier.fig.org/replace-data.x"},
			{Origin: "k8s-copier.fig.org/replace-data.x", Dst: "data.x", Mode: replace, Err: "also written by k8s-copier.fig.org/merge-data.x"},
			{Origin: "courier.dev/field-copies[0]", Dst: "data.y", Mode: replace, Value: "json:1"},
		}},
		{name: "protected and empty destinations", ann: map[string]string{
			"k8s-copier.fig.org/replace-metadata.name": "json:\"x\"",
			"k8s-copier.fig.org/replace-kind":          "json:\"x\"",
			"k8s-copier.fig.org/replace-":              "json:1",
		}, want: []summary{
			{Origin: "k8s-copier.fig.org/replace-", Dst: "", Mode: replace, Err: "empty path"},
			{Origin: "k8s-copier.fig.org/replace-kind", Dst: "kind", Mode: replace, Err: "may not write kind"},
			{Origin: "k8s-copier.fig.org/replace-metadata.name", Dst: "metadata.name", Mode: replace, Err: "may not write metadata"},
		}},
		{name: "paths too deep", ann: map[string]string{
			FieldCopiesAnnotation: `[{"to":"` + deep + `","from":"json:\"x\""},
				{"to":"data.x","from":"secret:s:` + deep + `"},
				{"to":"` + deepest + `","from":"secret:s:` + deepest + `"}]`,
		}, want: []summary{
			{Origin: "courier.dev/field-copies[2]", Dst: deepest, Mode: replace, Value: "secret:s:" + deepest},
			{Origin: "courier.dev/field-copies[0]", Dst: deep, Mode: replace, Err: "destination: path has 5002 segments; at most 100"},
			{Origin: "courier.dev/field-copies[1]", Dst: "data.x", Mode: replace, Err: "SRC-PATH: path has 5002 segments; at most 100"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(ParseAnnotations(tc.ann))
			if len(got) != len(tc.want) {
				t.Fatalf("got %d rules, want %d:\n%+v", len(got), len(tc.want), got)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				errOK := (w.Err == "") == (g.Err == "") && strings.Contains(g.Err, w.Err)
				gErr, wErr := g.Err, w.Err
				g.Err, w.Err = "", ""
				if g != w || !errOK {
					t.Errorf("rule %d:\n got %+v err %q\nwant %+v err containing %q", i, g, gErr, w, wErr)
				}
			}
		})
	}
}

// FuzzParseAnnotations builds annotations from a replace key, a merge key
// and a field-copies list, and checks that parsing never panics, is
// deterministic, loses no rule, and leaves every rule either Invalid with a
// message or complete.
func FuzzParseAnnotations(f *testing.F) {
	f.Add("spec.template.data", "secret:cloud-secret-master:data", "spec.x", `json:{"a":1}`, `[{"to":"data[ca.crt]","from":"secret:s:data[ca.crt]"}]`)
	f.Add("a", "json:1", "a", "json:2", `[{"to":"a","from":"json:3","mode":"merge"}]`)
	f.Add("", "", "..", ":::", `[1, {"to": null}]`)
	f.Fuzz(func(t *testing.T, rdst, rval, mdst, mval, list string) {
		ann := map[string]string{
			ReplacePrefix + rdst:  rval,
			MergePrefix + mdst:    mval,
			FieldCopiesAnnotation: list,
		}
		rules := ParseAnnotations(ann)
		if again := ParseAnnotations(ann); !reflect.DeepEqual(summarize(again), summarize(rules)) {
			t.Fatalf("not deterministic:\n%+v\n%+v", summarize(rules), summarize(again))
		}
		wantMin := 3
		var items []json.RawMessage
		if json.Unmarshal([]byte(list), &items) == nil {
			wantMin = 2 + len(items)
		}
		if len(rules) != wantMin {
			t.Fatalf("got %d rules, want %d", len(rules), wantMin)
		}
		dsts := map[string]int{}
		for _, r := range rules {
			if r.Origin == "" {
				t.Fatalf("rule without origin: %+v", r)
			}
			if r.Mode != courier.FieldCopyModeReplace && r.Mode != courier.FieldCopyModeMerge {
				t.Fatalf("rule %s has mode %q", r.Origin, r.Mode)
			}
			if r.Err != nil {
				if r.Err.Error() == "" {
					t.Fatalf("rule %s: empty error", r.Origin)
				}
				continue
			}
			if len(r.Destination) == 0 || (r.Value.Source == nil) == (r.Value.Literal == nil) {
				t.Fatalf("valid rule %s is incomplete: %+v", r.Origin, r)
			}
			dsts[r.Destination.String()]++
		}
		for d, n := range dsts {
			if n > 1 {
				t.Fatalf("%d valid rules write %q", n, d)
			}
		}
	})
}

func TestHasRules(t *testing.T) {
	for _, c := range []struct {
		annotations map[string]string
		want        bool
	}{
		{nil, false},
		{map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "k8s-copier.fig.org/other": "x"}, false},
		{map[string]string{ReplacePrefix + "spec.x": "json:1"}, true},
		{map[string]string{MergePrefix + "spec.x": "json:1"}, true},
		{map[string]string{FieldCopiesAnnotation: "[]"}, true},
	} {
		if got := HasRules(c.annotations); got != c.want {
			t.Errorf("HasRules(%v) = %v", c.annotations, got)
		}
	}
}
