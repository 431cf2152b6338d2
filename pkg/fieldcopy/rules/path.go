// Package rules parses k8s-copier style field-copy rules out of an object's
// annotations (docs/design.md#field-copies). It is pure: no clients, no cluster state. Every
// malformed rule becomes a Rule carrying its error, so one bad annotation
// yields one Invalid row and never hides or breaks the others.
package rules

import (
	"fmt"
	"strings"
)

// Path addresses a field inside an object as a list of map keys, from the
// top: spec.template.data is Path{"spec", "template", "data"}.
//
// Text syntax, as written in annotations:
//   - segments are separated by "."; a segment is any non-empty run of
//     characters other than ".", "[" and "]";
//   - a key holding a "." (Secret keys such as tls.crt) is written in
//     brackets, directly after the previous segment or at the start:
//     data[tls.crt], a.b[c.d].e, [x.y].z;
//   - a bracketed key is any non-empty run of characters other than "[" and
//     "]". There is no escaping: a key containing "[" or "]" cannot be
//     addressed (no Kubernetes map key in practice holds one, and a second
//     quoting layer inside annotation values would invite mistakes).
//
// Segments are always map keys; list indices are not supported, so a path
// that runs into a list is reported when the rule is applied.
type Path []string

// MaxPathSegments is the most segments a path may have, source or
// destination. No field of a Kubernetes object is nested anywhere near as
// deep: the deepest fields of the built-in kinds are about 15 levels down,
// and CRDs' rarely more than 30. A longer path is a mistake (or an attempt
// to make Courier build and send huge nested objects): a write there
// builds an object nested as deep, which the kube-apiserver's decoders
// refuse past 10,000 levels and which its schema for the kind refuses
// (with a 400 BadRequest whose text Courier cannot show, see writeError in
// package fieldcopy) long before. Refused when parsing, the rule is
// Invalid with a message saying so, before anything is read or written.
const MaxPathSegments = 100

// ParsePath parses the text syntax described on Path. It rejects empty
// paths and segments, unbalanced or nested brackets, a segment that
// follows a bracketed key without a ".", and paths of more than
// MaxPathSegments segments.
func ParsePath(s string) (Path, error) {
	if s == "" {
		return nil, fmt.Errorf("empty path")
	}
	var p Path
	i := 0
	// needSep is true after a segment: what follows must be ".", "[" or the end.
	needSep := false
	for i < len(s) {
		switch c := s[i]; {
		case c == '[':
			end := strings.IndexByte(s[i+1:], ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: %q at offset %d is never closed", s, "[", i)
			}
			key := s[i+1 : i+1+end]
			if key == "" {
				return nil, fmt.Errorf("path %q: empty key in brackets at offset %d", s, i)
			}
			if j := strings.IndexByte(key, '['); j >= 0 {
				return nil, fmt.Errorf("path %q: %q inside brackets at offset %d (keys holding brackets cannot be addressed)", s, "[", i+1+j)
			}
			p = append(p, key)
			i += end + 2
			needSep = true
		case c == ']':
			return nil, fmt.Errorf("path %q: %q at offset %d has no matching %q", s, "]", i, "[")
		case c == '.':
			if !needSep {
				return nil, fmt.Errorf("path %q: empty segment at offset %d", s, i)
			}
			i++
			needSep = false
			if i == len(s) {
				return nil, fmt.Errorf("path %q: ends with %q", s, ".")
			}
			if s[i] == '[' {
				return nil, fmt.Errorf("path %q: %q before a bracketed key at offset %d; write a[b] rather than a.[b]", s, ".", i-1)
			}
		default:
			if needSep {
				return nil, fmt.Errorf("path %q: expected %q or %q after a bracketed key at offset %d", s, ".", "[", i)
			}
			end := strings.IndexAny(s[i:], ".[]")
			if end < 0 {
				end = len(s) - i
			}
			p = append(p, s[i:i+end])
			i += end
			needSep = true
		}
	}
	if len(p) > MaxPathSegments {
		// Not quoted: such a path is long.
		return nil, fmt.Errorf("path has %d segments; at most %d", len(p), MaxPathSegments)
	}
	return p, nil
}

// String returns the canonical text of p: plain segments joined by ".",
// a segment holding "." in brackets. ParsePath(p.String()) equals p for
// every Path that ParsePath can return.
func (p Path) String() string {
	var b strings.Builder
	for i, seg := range p {
		if strings.ContainsAny(seg, ".]") || seg == "" {
			b.WriteString("[" + seg + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// Equal reports whether p and q address the same field.
func (p Path) Equal(q Path) bool {
	if len(p) != len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}
