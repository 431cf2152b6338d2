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
	event := make([]byte, 0, len(`{"type":"","object":`)+len(ev.Type)+len(raw)+len(envelopeTail))
	event = append(append(append(event, `{"type":"`...), ev.Type...), `","object":`...)
	event = append(append(event, raw...), envelopeTail...)
	return writeOrSplice(w, event)
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

// writeOrSplice hands b, which the caller will not change again, to w: by
// reference when w is an empty runtime.Splice, else by one write.
//
// The generic server's watch encoder (k8s.io/apiserver's watchEncoder)
// encodes each event's object and then the event into two buffers of its
// own, one pair per watch, which keep for the life of the watch the
// capacity of the largest object and event written into them (a typical
// row's event is 640 bytes). With 10,000 pulled Clusters' agents each
// holding an idle watch, that is about 13 MB of live heap doing nothing
// between changes (docs/benchmarks.md, "What is left per watch"). Both
// buffers are runtime.Splice values, which take a slice by reference and
// drop it at their Reset, right after the event is written out: an event
// spliced in is garbage once sent, and the buffers stay empty. The price
// is one allocation per object and one per event.
func writeOrSplice(w io.Writer, b []byte) error {
	if sp, ok := emptySplice(w); ok {
		sp.Splice(b)
		return nil
	}
	_, err := w.Write(b)
	return err
}

// emptySplice returns w as a runtime.Splice that holds nothing yet, and
// false for any other writer.
func emptySplice(w io.Writer) (runtime.Splice, bool) {
	sp, ok := w.(runtime.Splice)
	return sp, ok && len(sp.Bytes()) == 0
}

// splicingSerializer is a serializer whose encodings are spliced into an
// empty runtime.Splice instead of written into it (see writeOrSplice): the
// object of each watch event. Any other writer gets the wrapped
// serializer's writes unchanged.
type splicingSerializer struct {
	runtime.Serializer
}

var _ runtime.Serializer = splicingSerializer{}

// Encode encodes obj into a slice of its own when w is an empty Splice.
func (s splicingSerializer) Encode(obj runtime.Object, w io.Writer) error {
	sp, ok := emptySplice(w)
	if !ok {
		return s.Serializer.Encode(obj, w)
	}
	var encoded sliceWriter
	if err := s.Serializer.Encode(obj, &encoded); err != nil {
		return err
	}
	sp.Splice(encoded)
	return nil
}

// sliceWriter is an io.Writer that appends to itself.
type sliceWriter []byte

func (b *sliceWriter) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}
