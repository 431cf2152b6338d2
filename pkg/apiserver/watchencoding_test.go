package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

// streamEncoders returns the JSON stream encoder for v1alpha1 as the plain
// codec factory negotiates it and as the server does, plus the server's
// single-object JSON encoder and its pretty one, which encode the objects
// the events carry.
func streamEncoders(t testing.TB) (plain, fast, object, pretty runtime.Encoder) {
	t.Helper()
	find := func(infos []runtime.SerializerInfo) runtime.SerializerInfo {
		for _, info := range infos {
			if info.MediaType == runtime.ContentTypeJSON {
				return info
			}
		}
		t.Fatal("no JSON serializer")
		return runtime.SerializerInfo{}
	}
	gv := v1alpha1.SchemeGroupVersion
	server := newRowEncodings(Codecs)
	info := find(server.SupportedMediaTypes())
	if _, ok := info.StreamSerializer.Serializer.(watchEventSerializer); !ok {
		t.Fatalf("the server's JSON stream serializer is %T, not the watch event serializer", info.StreamSerializer.Serializer)
	}
	if _, ok := find(Codecs.SupportedMediaTypes()).StreamSerializer.Serializer.(watchEventSerializer); ok {
		t.Fatal("wrapping changed the codec factory's own stream serializer")
	}
	return Codecs.EncoderForVersion(find(Codecs.SupportedMediaTypes()).StreamSerializer.Serializer, gv),
		server.EncoderForVersion(info.StreamSerializer.Serializer, gv),
		server.EncoderForVersion(info.Serializer, gv),
		Codecs.EncoderForVersion(info.PrettySerializer, gv)
}

func encodeTo(t testing.TB, enc runtime.Encoder, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := enc.Encode(obj, &buf); err != nil {
		t.Fatalf("encoding %T: %v", obj, err)
	}
	return buf.Bytes()
}

// The server's stream serializer writes every watch event exactly as the
// plain one does, and takes the direct path for the objects the JSON
// serializer encodes: rows whose strings hold what JSON escapes (quotes,
// backslashes, HTML characters, line separators, control characters),
// and the Status of an ERROR event. A pretty object, or bytes that
// compaction would change, take the long way.
func TestWatchEventsAreWrittenAsEncodingJSONWritesThem(t *testing.T) {
	plain, fast, object, pretty := streamEncoders(t)
	row := func(message string) runtime.Object {
		r := storedRow("r1", "7", message)
		out := &v1alpha1.DownstreamCopy{}
		if err := Scheme.Convert(&r, out, nil); err != nil {
			t.Fatal(err)
		}
		return out
	}
	status := &metav1.Status{Status: metav1.StatusFailure, Message: "too old resource version: 1 (7)", Reason: metav1.StatusReasonExpired, Code: 410}
	cases := []struct {
		name   string
		event  string
		raw    []byte
		direct bool
	}{
		{"a row", "MODIFIED", encodeTo(t, object, row("the copy matches its source")), true},
		{"quotes and backslashes", "ADDED", encodeTo(t, object, row(`a "quoted" \path\ and \"`)), true},
		{"HTML characters", "MODIFIED", encodeTo(t, object, row("<b>&amp;</b> -> done")), true},
		{"line and paragraph separators", "MODIFIED", encodeTo(t, object, row("one\u2028two\u2029three")), true},
		{"control characters and unicode", "DELETED", encodeTo(t, object, row("tab\there\nnewline é 漢字 \x01")), true},
		{"an ERROR event's Status", "ERROR", encodeTo(t, object, status), true},
		{"a bookmark", "BOOKMARK", encodeTo(t, object, &v1alpha1.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "12"}}), true},
		{"a pretty object", "MODIFIED", encodeTo(t, pretty, row("pretty")), false},
		{"spaces outside strings", "MODIFIED", []byte(`{"a": 1 , "b" :[ 1, 2 ]}`), false},
		{"an HTML character left unescaped", "MODIFIED", []byte(`{"a":"<b>"}`), false},
		{"a line separator left unescaped", "MODIFIED", []byte("{\"a\":\"x\u2028y\"}"), false},
		{"an event type JSON would escape", "MODI\"FIED", encodeTo(t, object, row("ok")), false},
		{"no object", "MODIFIED", nil, false},
		{"a scalar", "MODIFIED", []byte(`"text"`), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := &metav1.WatchEvent{Type: tc.event, Object: runtime.RawExtension{Raw: tc.raw}}
			want, got := encodeTo(t, plain, ev), encodeTo(t, fast, ev)
			if !bytes.Equal(got, want) {
				t.Errorf("the server wrote\n%s\nencoding/json writes\n%s", got, want)
			}
			raw := bytes.TrimSuffix(tc.raw, []byte{'\n'})
			if direct := plainWord(tc.event) && compactAndEscaped(raw); direct != tc.direct {
				t.Errorf("direct path taken: %v, want %v", direct, tc.direct)
			}
		})
	}
}

// spliceRecorder is a runtime.Splice, like the generic server's watch
// encoder's buffers, that records whether it was written or spliced.
type spliceRecorder struct {
	written, spliced []byte
	writes           int
}

var _ runtime.Splice = &spliceRecorder{}

func (r *spliceRecorder) Splice(b []byte) { r.spliced = b }
func (r *spliceRecorder) Reset()          { r.written, r.spliced = nil, nil }
func (r *spliceRecorder) Write(p []byte) (int, error) {
	r.writes++
	r.written = append(r.written, p...)
	return len(p), nil
}
func (r *spliceRecorder) Bytes() []byte {
	switch {
	case len(r.written) > 0:
		return r.written
	case r.spliced != nil:
		return r.spliced
	}
	return []byte{}
}

// A watch's object and event are spliced into the watch encoder's buffers,
// which then hold nothing between events, and the bytes sent are what the
// plain serializers write. The encoder encodes the object into one Splice
// and the event, holding those bytes, into another, as k8s.io/apiserver's
// watchEncoder.doEncode does; a Splice already holding bytes is written
// after them, as a buffer is.
func TestWatchEventsAreSplicedIntoTheWatchEncodersBuffers(t *testing.T) {
	plain, fast, object, _ := streamEncoders(t)
	plainObject := Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)
	r := storedRow("r1", "7", "the copy matches its source")
	row := &v1alpha1.DownstreamCopy{}
	if err := Scheme.Convert(&r, row, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		event string
		// raw, when set, is the event's object instead of the row's
		// encoding: bytes that take the long way.
		raw []byte
	}{
		{name: "a row, the direct way", event: "MODIFIED"},
		{name: "an event type JSON would escape, the long way", event: "MODI\"FIED"},
		{name: "an object with spaces, the long way", event: "ADDED", raw: []byte(`{"a": 1}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objectBuf, eventBuf spliceRecorder
			if err := object.Encode(row, &objectBuf); err != nil {
				t.Fatal(err)
			}
			if want := encodeTo(t, plainObject, row); !bytes.Equal(objectBuf.Bytes(), want) {
				t.Fatalf("the object spliced is\n%s\nthe plain serializer writes\n%s", objectBuf.Bytes(), want)
			}
			raw := objectBuf.Bytes()
			if tc.raw != nil {
				raw = tc.raw
			}
			ev := &metav1.WatchEvent{Type: tc.event, Object: runtime.RawExtension{Raw: raw}}
			if err := fast.Encode(ev, &eventBuf); err != nil {
				t.Fatal(err)
			}
			if want := encodeTo(t, plain, ev); !bytes.Equal(eventBuf.Bytes(), want) {
				t.Errorf("the event spliced is\n%s\nencoding/json writes\n%s", eventBuf.Bytes(), want)
			}
			if objectBuf.writes != 0 || eventBuf.writes != 0 {
				t.Errorf("writes into the watch encoder's buffers: %d for the object, %d for the event; want none", objectBuf.writes, eventBuf.writes)
			}

			// The positive control: a buffer that holds bytes already is
			// written after them, never spliced over them.
			objectBuf.Reset()
			eventBuf.Reset()
			_, _ = objectBuf.Write([]byte("x"))
			_, _ = eventBuf.Write([]byte("y"))
			if err := object.Encode(row, &objectBuf); err != nil {
				t.Fatal(err)
			}
			if err := fast.Encode(ev, &eventBuf); err != nil {
				t.Fatal(err)
			}
			if want := append([]byte("x"), encodeTo(t, plainObject, row)...); !bytes.Equal(objectBuf.Bytes(), want) {
				t.Errorf("a buffer holding bytes got\n%s\nwant\n%s", objectBuf.Bytes(), want)
			}
			if want := append([]byte("y"), encodeTo(t, plain, ev)...); !bytes.Equal(eventBuf.Bytes(), want) {
				t.Errorf("a buffer holding bytes got\n%s\nwant\n%s", eventBuf.Bytes(), want)
			}
		})
	}
}

// Whatever bytes an event carries, the server writes what encoding/json
// writes, or fails as it does.
func FuzzWatchEventEncoding(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"a":"b"}`, `{"a": "b"}`, `{"a":"<"}`, `{"a":"\u003c"}`, `[1,2,{"x":null}]`,
		`{"s":"a\\\"b"}`, "{\"s\":\"\u2028\"}", `{"s":"\\u2028"}`, "{\"s\":\"\xe2\x80\"}", `{"a":1}` + "\n", `{"a":1} `,
	} {
		f.Add("MODIFIED", []byte(seed))
	}
	f.Fuzz(func(t *testing.T, eventType string, raw []byte) {
		if !json.Valid(raw) {
			t.Skip("the objects' encoders write JSON")
		}
		plain, fast, _, _ := streamEncoders(t)
		ev := &metav1.WatchEvent{Type: eventType, Object: runtime.RawExtension{Raw: raw}}
		var want, got bytes.Buffer
		wantErr, gotErr := plain.Encode(ev, &want), fast.Encode(ev, &got)
		if (wantErr == nil) != (gotErr == nil) || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("event %q of %q: the server wrote %q (%v), encoding/json %q (%v)", eventType, raw, got.Bytes(), gotErr, want.Bytes(), wantErr)
		}
	})
}

// BenchmarkWatchEventEnvelope encodes one event of a typical row's size the
// generic server's way and the direct way.
func BenchmarkWatchEventEnvelope(b *testing.B) {
	plain, fast, object, _ := streamEncoders(b)
	r := storedRow("r1", "7", "the copy matches its source")
	out := &v1alpha1.DownstreamCopy{}
	if err := Scheme.Convert(&r, out, nil); err != nil {
		b.Fatal(err)
	}
	ev := &metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: encodeTo(b, object, out)}}
	for _, enc := range []struct {
		name string
		enc  runtime.Encoder
	}{{"encoding-json", plain}, {"direct", fast}} {
		b.Run(enc.name, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := enc.enc.Encode(ev, &buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
