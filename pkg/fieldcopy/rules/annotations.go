package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// Annotation keys (docs/design.md#field-copies).
const (
	// ReplacePrefix starts k8s-copier's annotation: the rest of the key is
	// the destination path, the value replaces it.
	ReplacePrefix = "k8s-copier.fig.org/replace-"
	// MergePrefix is like ReplacePrefix but merges the value onto the
	// destination as a JSON merge patch (RFC 7386).
	MergePrefix = "k8s-copier.fig.org/merge-"
	// FieldCopiesAnnotation holds a JSON list of rules for destinations an
	// annotation key cannot spell (brackets, paths over 63 characters).
	FieldCopiesAnnotation = "courier.dev/field-copies"
)

// Rule is one field-copy rule of one object. When Err is set the rule is
// Invalid and only Origin, DestinationText and Mode are meaningful.
type Rule struct {
	// Origin says where the rule was written: the annotation key, or
	// courier.dev/field-copies[i] for the i-th entry of the list.
	Origin string
	// DestinationText is the destination as written; it names the rule's
	// row even when it does not parse.
	DestinationText string
	// Destination is the parsed destination path.
	Destination Path
	Mode        courier.FieldCopyMode
	Value       Value
	// Err says why the rule is Invalid. It does not name Origin: whoever
	// shows it does (the row's message is "<Origin>: <Err>").
	Err error
}

// DestinationName is the destination for display and row names: the
// canonical path when it parsed, else the text as written.
func (r Rule) DestinationName() string {
	if r.Destination != nil {
		return r.Destination.String()
	}
	return r.DestinationText
}

// IsRuleAnnotation reports whether an annotation key holds field-copy
// rules: a replace- or merge- key, or courier.dev/field-copies.
func IsRuleAnnotation(key string) bool {
	return strings.HasPrefix(key, ReplacePrefix) || strings.HasPrefix(key, MergePrefix) || key == FieldCopiesAnnotation
}

// HasRules reports whether annotations hold a field-copy rule key, without
// parsing anything: the cheap test for "is this object a target at all".
func HasRules(annotations map[string]string) bool {
	for key := range annotations {
		if IsRuleAnnotation(key) {
			return true
		}
	}
	return false
}

// fieldCopyEntry is one element of the courier.dev/field-copies list.
type fieldCopyEntry struct {
	To   *string `json:"to"`
	From *string `json:"from"`
	Mode string  `json:"mode,omitempty"`
}

// ParseAnnotations returns the rules written in an object's annotations,
// sorted by destination then origin so every replica sees the same order.
// It never fails: malformed rules carry their error. Two rules writing the
// same destination are both Invalid, each naming the other.
func ParseAnnotations(annotations map[string]string) []Rule {
	var out []Rule
	for key, val := range annotations {
		switch {
		case strings.HasPrefix(key, ReplacePrefix):
			out = append(out, keyRule(key, strings.TrimPrefix(key, ReplacePrefix), val, courier.FieldCopyModeReplace))
		case strings.HasPrefix(key, MergePrefix):
			out = append(out, keyRule(key, strings.TrimPrefix(key, MergePrefix), val, courier.FieldCopyModeMerge))
		case key == FieldCopiesAnnotation:
			out = append(out, listRules(val)...)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].DestinationName(), out[j].DestinationName()
		if a != b {
			return a < b
		}
		return out[i].Origin < out[j].Origin
	})
	markDuplicates(out)
	return out
}

func keyRule(origin, dst, val string, mode courier.FieldCopyMode) Rule {
	r := Rule{Origin: origin, DestinationText: dst, Mode: mode}
	r.Destination, r.Value, r.Err = parseRule(dst, val)
	return r
}

func parseRule(dst, val string) (Path, Value, error) {
	p, err := ParsePath(dst)
	if err != nil {
		return nil, Value{}, fmt.Errorf("destination: %w", err)
	}
	if err := checkDestination(p); err != nil {
		return p, Value{}, err
	}
	v, err := ParseValue(val)
	if err != nil {
		return p, Value{}, err
	}
	return p, v, nil
}

// checkDestination refuses destinations that would rewrite the object's
// identity or its rules: a copy into metadata could rename the object or
// rewrite its own annotations, and apiVersion or kind cannot change.
func checkDestination(p Path) error {
	switch p[0] {
	case "metadata", "apiVersion", "kind":
		return fmt.Errorf("destination %q: a field copy may not write %s", p.String(), p[0])
	}
	return nil
}

func listRules(val string) []Rule {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(val), &raw); err != nil {
		return []Rule{{
			Origin:          FieldCopiesAnnotation,
			DestinationText: FieldCopiesAnnotation,
			Mode:            courier.FieldCopyModeReplace,
			Err:             fmt.Errorf("not a JSON list of {\"to\", \"from\", \"mode\"}: %v", err),
		}}
	}
	out := make([]Rule, 0, len(raw))
	for i, item := range raw {
		origin := fmt.Sprintf("%s[%d]", FieldCopiesAnnotation, i)
		r := Rule{Origin: origin, DestinationText: origin, Mode: courier.FieldCopyModeReplace}
		var e fieldCopyEntry
		if err := json.Unmarshal(item, &e); err != nil {
			r.Err = fmt.Errorf("not an object {\"to\", \"from\", \"mode\"}: %v", err)
			out = append(out, r)
			continue
		}
		if e.To != nil {
			r.DestinationText = *e.To
		}
		// Decoded twice so that an entry with a misspelt field still names
		// its row by its destination.
		dec := json.NewDecoder(strings.NewReader(string(item)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fieldCopyEntry{}); err != nil {
			r.Err = fmt.Errorf("%v (fields are \"to\", \"from\" and \"mode\")", err)
			out = append(out, r)
			continue
		}
		switch strings.ToLower(e.Mode) {
		case "", "replace":
		case "merge":
			r.Mode = courier.FieldCopyModeMerge
		default:
			r.Err = fmt.Errorf("mode %q is neither \"replace\" nor \"merge\"", e.Mode)
		}
		switch {
		case r.Err != nil:
		case e.To == nil:
			r.Err = errors.New(`missing "to"`)
		case e.From == nil:
			r.Err = errors.New(`missing "from"`)
		default:
			r.Destination, r.Value, r.Err = parseRule(*e.To, *e.From)
		}
		out = append(out, r)
	}
	return out
}

// markDuplicates makes every rule whose destination another rule also
// writes Invalid, naming the others: which one should win is not something
// Courier can guess. rules is sorted by destination.
func markDuplicates(rules []Rule) {
	for i := 0; i < len(rules); {
		j := i + 1
		for j < len(rules) && rules[j].Destination != nil && rules[i].Destination != nil &&
			rules[j].Destination.Equal(rules[i].Destination) {
			j++
		}
		if j-i > 1 {
			for k := i; k < j; k++ {
				var others []string
				for m := i; m < j; m++ {
					if m != k {
						others = append(others, rules[m].Origin)
					}
				}
				rules[k].Err = fmt.Errorf("destination %q is also written by %s; remove all but one", rules[k].Destination.String(), strings.Join(others, ", "))
			}
		}
		i = j
	}
}
