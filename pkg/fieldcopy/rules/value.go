package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	pathvalidation "k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/validation"
)

// literalPrefix starts a value that is a JSON literal rather than a source.
const literalPrefix = "json:"

// Value is the right-hand side of a rule: where the value comes from.
// Exactly one of Source and Literal is set.
type Value struct {
	// Source is the object and path read, for RESOURCE:INSTANCE:SRC-PATH.
	Source *Source
	// Literal is the JSON after "json:", compacted; it is valid JSON.
	Literal json.RawMessage
}

// Source is RESOURCE:INSTANCE:SRC-PATH.
type Source struct {
	// Resource as written: singular, plural or kind, with optional
	// .VERSION.GROUP. It is resolved against discovery by the controller.
	Resource string
	// Namespace is empty when INSTANCE is a bare name: the target's namespace.
	Namespace string
	Name      string
	Path      Path
}

// Instance returns INSTANCE as written in the canonical form: name, or
// namespace/name.
func (s Source) Instance() string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}

// ParseValue parses `RESOURCE:INSTANCE:SRC-PATH` or `json:JSON`. INSTANCE
// is `name` or `namespace/name`. The first two ":" separate the parts, so a
// path may hold ":" and RESOURCE and INSTANCE may not.
func ParseValue(s string) (Value, error) {
	if rest, ok := strings.CutPrefix(s, literalPrefix); ok {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(rest)); err != nil {
			return Value{}, fmt.Errorf("the JSON after %q is not valid: %v", literalPrefix, err)
		}
		if buf.Len() == 0 {
			return Value{}, fmt.Errorf("no JSON after %q", literalPrefix)
		}
		return Value{Literal: json.RawMessage(buf.Bytes())}, nil
	}
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return Value{}, fmt.Errorf("%q is neither RESOURCE:INSTANCE:SRC-PATH nor json:JSON", s)
	}
	resource, instance, path := parts[0], parts[1], parts[2]
	if resource == "" {
		return Value{}, fmt.Errorf("%q: empty RESOURCE", s)
	}
	if strings.ContainsAny(resource, "/ \t\n") {
		return Value{}, fmt.Errorf("%q: RESOURCE %q is not a resource name (RESOURCE[.VERSION[.GROUP]])", s, resource)
	}
	src := &Source{Resource: resource}
	ns, name, hasNS := strings.Cut(instance, "/")
	if !hasNS {
		ns, name = "", instance
	}
	if name == "" {
		return Value{}, fmt.Errorf("%q: empty object name in INSTANCE %q", s, instance)
	}
	if msgs := pathvalidation.IsValidPathSegmentName(name); len(msgs) > 0 {
		return Value{}, fmt.Errorf("%q: object name %q: %s", s, name, strings.Join(msgs, "; "))
	}
	if hasNS {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return Value{}, fmt.Errorf("%q: namespace %q in INSTANCE: %s", s, ns, strings.Join(msgs, "; "))
		}
	}
	src.Namespace, src.Name = ns, name
	p, err := ParsePath(path)
	if err != nil {
		return Value{}, fmt.Errorf("SRC-PATH: %w", err)
	}
	src.Path = p
	return Value{Source: src}, nil
}

// String returns the canonical text of v; ParseValue(v.String()) equals v.
func (v Value) String() string {
	if v.Source == nil {
		return literalPrefix + string(v.Literal)
	}
	return v.Source.Resource + ":" + v.Source.Instance() + ":" + v.Source.Path.String()
}
