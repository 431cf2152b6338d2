package apiserver

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

// jsonEncoders returns the plain JSON encoder for v1alpha1 and the one
// with cached row encodings, as the server negotiates them.
func jsonEncoders(t *testing.T) (plain, cached runtime.Encoder) {
	t.Helper()
	find := func(infos []runtime.SerializerInfo) runtime.Serializer {
		for _, info := range infos {
			if info.MediaType == runtime.ContentTypeJSON {
				return info.Serializer
			}
		}
		t.Fatal("no JSON serializer")
		return nil
	}
	rows := newRowEncodings(Codecs)
	return Codecs.EncoderForVersion(find(Codecs.SupportedMediaTypes()), v1alpha1.SchemeGroupVersion),
		rows.EncoderForVersion(find(rows.SupportedMediaTypes()), v1alpha1.SchemeGroupVersion)
}

func encode(t *testing.T, enc runtime.Encoder, obj runtime.Object) string {
	t.Helper()
	var buf bytes.Buffer
	if err := enc.Encode(obj, &buf); err != nil {
		t.Fatalf("encoding %T: %v", obj, err)
	}
	return buf.String()
}

// row is a stored row: the store gives each version a resourceVersion.
func storedRow(name, rv, message string) courier.DownstreamCopy {
	r := dcpRow(name, "Secret", "db")
	r.ResourceVersion = rv
	at := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	r.Status.Message = message
	r.Status.LastSyncTime = &at
	r.Status.Conditions = []metav1.Condition{{Type: courier.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "Synced", Message: message}}
	r.Labels = map[string]string{"courier.dev/cluster": "edge1"}
	return *r
}

// The cached encoder writes exactly what the plain JSON serializer writes,
// for lists of every shape, and a row's new version is encoded anew.
//
// Each case has a cache of its own: the store never gives two contents
// of one row the same resourceVersion, and these cases do.
func TestRowListEncodingMatchesTheSerializer(t *testing.T) {
	odd := "<b>&\"quotes\"</b> \u2028 é 日本 \\ \t"
	cases := []struct {
		name string
		list *courier.DownstreamCopyList
	}{
		{"empty", &courier.DownstreamCopyList{}},
		{"empty with a resourceVersion", &courier.DownstreamCopyList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}},
		{"one row", &courier.DownstreamCopyList{ListMeta: metav1.ListMeta{ResourceVersion: "9"},
			Items: []courier.DownstreamCopy{storedRow("a", "3", "the copy matches its source")}}},
		{"rows with characters JSON escapes", &courier.DownstreamCopyList{ListMeta: metav1.ListMeta{ResourceVersion: "9"},
			Items: []courier.DownstreamCopy{storedRow("a", "3", odd), storedRow("b", "4", "")}}},
		{"a page, with continue and remaining", &courier.DownstreamCopyList{
			ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "abc", RemainingItemCount: ptr(int64(5))},
			Items:    []courier.DownstreamCopy{storedRow("a", "3", "x"), storedRow("b", "4", "y"), storedRow("c", "5", "z")}}},
		{"a row without a resourceVersion", &courier.DownstreamCopyList{Items: []courier.DownstreamCopy{storedRow("a", "", "no rv")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plain, cached := jsonEncoders(t)
			want := encode(t, plain, tc.list.DeepCopy())
			for i := 0; i < 2; i++ { // the second time from the cache
				if got := encode(t, cached, tc.list.DeepCopy()); got != want {
					t.Fatalf("encoding %d:\n got %s\nwant %s", i+1, got, want)
				}
			}
		})
	}
	// Single rows and other kinds are the serializer's.
	plain, cached := jsonEncoders(t)
	one := storedRow("a", "3", odd)
	if got, want := encode(t, cached, &one), encode(t, plain, &one); got != want {
		t.Errorf("a single row:\n got %s\nwant %s", got, want)
	}
}

// A row's encoding follows its resourceVersion: the same name with new
// content and a new resourceVersion is never served from the old entry.
func TestRowEncodingFollowsTheResourceVersion(t *testing.T) {
	_, cached := jsonEncoders(t)
	list := func(rv, msg string) *courier.DownstreamCopyList {
		return &courier.DownstreamCopyList{Items: []courier.DownstreamCopy{storedRow("a", rv, msg)}}
	}
	if got := encode(t, cached, list("3", "first")); !strings.Contains(got, `"message":"first"`) {
		t.Fatalf("first version: %s", got)
	}
	if got := encode(t, cached, list("4", "second")); !strings.Contains(got, `"message":"second"`) || strings.Contains(got, "first") {
		t.Fatalf("second version served %s", got)
	}
}

// Entries of rows no list serves any more are dropped once the cache is
// larger than twice the last list and pruneAbove, and the rows still
// listed survive a prune.
func TestRowEncodingCachePrunes(t *testing.T) {
	c := &rowEncodingCache{rows: map[string]rowEncoding{}}
	get := func(name, rv string) {
		t.Helper()
		r := storedRow(name, rv, "m")
		ext := &v1alpha1.DownstreamCopy{}
		if err := Scheme.Convert(&r, ext, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.encoding(ext); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < pruneAbove; i++ {
		get(fmt.Sprintf("old-%d", i), "1")
	}
	c.listed(pruneAbove)
	if len(c.rows) != pruneAbove {
		t.Fatalf("cache holds %d rows, want %d", len(c.rows), pruneAbove)
	}
	// The old rows are gone: lists now serve two others.
	for round := 0; round < 3; round++ {
		get("kept-a", "2")
		get("kept-b", "2")
		c.listed(2)
		get(fmt.Sprintf("new-%d", round), "3") // a new row: may prune
	}
	if len(c.rows) > 8 {
		t.Errorf("cache holds %d rows after the old ones went, want at most 8", len(c.rows))
	}
	for _, k := range []string{"fleet-default/kept-a", "fleet-default/kept-b"} {
		if _, ok := c.rows[k]; !ok {
			t.Errorf("%s, listed every time, was pruned", k)
		}
	}
}

// Through the server, a list asked for with gzip is compressed, as the
// plain serializer's is, and reads back as the same rows.
func TestRowListIsCompressed(t *testing.T) {
	h := testServer(t)
	var rows []*courier.DownstreamCopy
	for i := 0; i < 400; i++ { // more than the response writer's 128 KiB gzip threshold
		r := dcpRow(fmt.Sprintf("row-%03d", i), "Secret", "db")
		r.Status.Message = strings.Repeat("m", 300)
		rows = append(rows, r)
	}
	testStore.Replace(rows)
	plain := listRows(t, h, false)
	if enc := plain.Header().Get("Content-Encoding"); enc != "" {
		t.Fatalf("without Accept-Encoding the list came %q", enc)
	}
	if n := strings.Count(plain.Body.String(), `"kind":"Secret"`); n != 400 {
		t.Fatalf("list holds %d rows, want 400", n)
	}
	if enc := listRows(t, h, true).Header().Get("Content-Encoding"); enc != "gzip" {
		t.Errorf("with Accept-Encoding: gzip the list came %q, want gzip", enc)
	}
}

func ptr[T any](v T) *T { return &v }
