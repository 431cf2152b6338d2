package apiserver

import (
	"bytes"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// watchEventSerializer is the JSON stream serializer, with the envelope of
// a watch event written directly around its object's encoding.
//
// The generic server encodes each watch event twice over: the object into
// a buffer, then a metav1.WatchEvent holding those bytes as a
// RawExtension, through encoding/json, which validates and compacts every
// byte of the embedded object again. With 10,000 pulled Clusters' agents
// watching, a source change is 10,000 events, and that second pass was
// 8.6 % of a replica's CPU, more than the envelope itself
// (docs/benchmarks.md, "A change at 10,000 agents"). An object encoded by
// the JSON serializer is compact and HTML-escaped already, so compacting it
// changes nothing; compactAndEscaped checks that in one pass, much cheaper
// than encoding/json's scanner, and anything it is not sure of goes the
// long way.
//
// The output is byte for byte encoding/json's: `{"type":…,"object":…}`
// and a newline.
type watchEventSerializer struct {
	runtime.Serializer
}

var _ runtime.Serializer = watchEventSerializer{}

// Encode writes a watch event whose type is a plain word and whose object
// is compact, escaped JSON around that object's bytes; anything else is
// the wrapped serializer's.
func (s watchEventSerializer) Encode(obj runtime.Object, w io.Writer) error {
	ev, ok := obj.(*metav1.WatchEvent)
	if !ok || !plainWord(ev.Type) {
		return s.Serializer.Encode(obj, w)
	}
	// The JSON serializer ends an object's encoding with a newline, which
	// encoding/json's compaction drops.
	raw := bytes.TrimSuffix(ev.Object.Raw, []byte{'\n'})
	if !compactAndEscaped(raw) {
		return s.Serializer.Encode(obj, w)
	}
	// One write of the head, one of the object and one of the tail: the
	// writer is the watch encoder's buffer, and every part written through
	// an interface is allocated.
	head := make([]byte, 0, len(`{"type":"","object":`)+len(ev.Type))
	head = append(append(append(head, `{"type":"`...), ev.Type...), `","object":`...)
	if _, err := w.Write(head); err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	_, err := w.Write(envelopeTail)
	return err
}

// envelopeTail closes an event's envelope, with encoding/json's newline.
var envelopeTail = []byte("}\n")

// plainWord reports whether s is a non-empty run of ASCII letters, which
// JSON writes as they are (every watch event type is one).
func plainWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// compactAndEscaped reports whether b is an object or array that
// encoding/json's compaction, with HTML escaping, would leave as it is: no
// whitespace outside strings, no control character, no '<', '>' or '&'
// anywhere, and no U+2028 or U+2029. It does not validate the JSON: b
// comes from a JSON encoder. Strings are followed only to tell where
// whitespace is significant.
func compactAndEscaped(b []byte) bool {
	if len(b) < 2 || (b[0] != '{' && b[0] != '[') {
		return false
	}
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return false // whitespace outside a string, or a raw control character or HTML character
		case c == ' ' && !inString:
			return false
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			return false // U+2028 or U+2029, which encoding/json escapes
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		}
	}
	return !inString
}
