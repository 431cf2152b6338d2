package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

// rowEncodings is a NegotiatedSerializer that encodes lists of
// downstreamcopies as JSON from each row's encoding, made once per
// stored version of the row, instead of encoding every row again on every
// list. A list of 10,000 rows spent most of its time in encoding/json's
// reflection over rows that had not changed since the last list (CPU
// profile of BenchmarkListRows, docs/benchmarks.md); the kube-apiserver's
// watch cache keeps encodings of the objects it sends for the same reason.
//
// The output is byte for byte what the plain JSON serializer writes: the
// list's envelope comes from that serializer, and each row is encoded the
// way its streaming list encoder encodes an item. The JSON watch stream's
// event envelopes, of every resource of the group, are written around
// their objects' bytes (watchEventSerializer). Everything else (other
// media types, other kinds, pretty JSON, single rows) goes to the wrapped
// serializer unchanged.
type rowEncodings struct {
	runtime.NegotiatedSerializer
	rows *rowEncodingCache
}

var _ runtime.NegotiatedSerializer = rowEncodings{}

func newRowEncodings(ns runtime.NegotiatedSerializer) rowEncodings {
	return rowEncodings{NegotiatedSerializer: ns, rows: &rowEncodingCache{rows: map[string]rowEncoding{}}}
}

// SupportedMediaTypes is the wrapped serializer's, with the plain JSON
// serializer encoding downstreamcopies lists from the cache, and its
// stream serializer writing watch events' envelopes directly; both splice
// what they encode for a watch into the watch encoder's buffers
// (watchencoding.go).
func (r rowEncodings) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := r.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	copy(out, infos)
	for i := range out {
		if out[i].MediaType != runtime.ContentTypeJSON {
			continue
		}
		if out[i].Serializer != nil {
			out[i].Serializer = rowListSerializer{Serializer: splicingSerializer{Serializer: out[i].Serializer}, rows: r.rows}
		}
		if st := out[i].StreamSerializer; st != nil && st.Serializer != nil {
			stream := *st // the wrapped factory's own stays as it is
			stream.Serializer = watchEventSerializer{Serializer: splicingSerializer{Serializer: st.Serializer}}
			out[i].StreamSerializer = &stream
		}
	}
	return out
}

// rowListSerializer is the JSON serializer, with lists of rows encoded
// from cached row encodings.
type rowListSerializer struct {
	runtime.Serializer
	rows *rowEncodingCache
}

// Encode writes a v1alpha1 DownstreamCopyList from its rows' cached
// encodings; anything else is the wrapped serializer's.
func (s rowListSerializer) Encode(obj runtime.Object, w io.Writer) error {
	list, ok := obj.(*v1alpha1.DownstreamCopyList)
	if !ok || len(list.Items) == 0 {
		return s.Serializer.Encode(obj, w)
	}
	// The envelope: the same list with no rows, as the serializer writes
	// it, ends in `[]}` and a newline; the rows go between the brackets.
	empty := *list
	empty.Items = []v1alpha1.DownstreamCopy{}
	var envelope bytes.Buffer
	if err := s.Serializer.Encode(&empty, &envelope); err != nil {
		return err
	}
	head, tail, ok := splitEnvelope(envelope.Bytes())
	if !ok {
		return s.Serializer.Encode(obj, w) // not the shape expected: encode it all
	}
	bw := &errWriter{w: w}
	// The response writer buffers, and so may compress, only a response
	// whose first write is tiny, as the streaming encoder's "{" is: a list
	// written otherwise would go out without the gzip the client asked for.
	bw.write(head[:1])
	bw.write(head[1:])
	for i := range list.Items {
		if i > 0 {
			bw.write([]byte{','})
		}
		b, err := s.rows.encoding(&list.Items[i])
		if err != nil {
			return err
		}
		bw.write(b)
	}
	bw.write(tail)
	s.rows.listed(len(list.Items))
	return bw.err
}

// splitEnvelope splits an encoded list with no items at its `[]`.
func splitEnvelope(b []byte) (head, tail []byte, ok bool) {
	const items = `"items":[]`
	i := bytes.LastIndex(b, []byte(items))
	if i < 0 {
		return nil, nil, false
	}
	cut := i + len(items) - 1
	return b[:cut], b[cut:], true
}

// rowEncodingCache holds the JSON encoding of each row's last stored
// version. The store gives every stored change a new resourceVersion, so
// a row's name and resourceVersion identify its content. An entry is
// replaced when its row changes. Entries of rows that are gone stay until
// the cache holds more than twice the rows of the last list (and at least
// pruneAbove): the next new entry then drops every entry no list used
// since the previous prune.
type rowEncodingCache struct {
	mu   sync.Mutex
	rows map[string]rowEncoding // namespace/name -> encoding
	// lastList is how many rows the last list encoded.
	lastList int
}

type rowEncoding struct {
	resourceVersion string
	json            []byte
	used            bool
}

// pruneAbove is the smallest cache that is ever pruned.
const pruneAbove = 1024

func (c *rowEncodingCache) encoding(row *v1alpha1.DownstreamCopy) ([]byte, error) {
	key := row.Namespace + "/" + row.Name
	rv := row.ResourceVersion
	c.mu.Lock()
	e, ok := c.rows[key]
	if ok && rv != "" && e.resourceVersion == rv {
		if !e.used {
			e.used = true
			c.rows[key] = e
		}
		c.mu.Unlock()
		return e.json, nil
	}
	c.mu.Unlock()

	b, err := encodeItem(row)
	if err != nil {
		return nil, err
	}
	if rv == "" {
		return b, nil // nothing identifies this content: not kept
	}
	c.mu.Lock()
	if len(c.rows) >= max(2*c.lastList, pruneAbove) {
		c.pruneLocked()
	}
	c.rows[key] = rowEncoding{resourceVersion: rv, json: b, used: true}
	c.mu.Unlock()
	return b, nil
}

// pruneLocked drops the entries no list used since the last prune.
func (c *rowEncodingCache) pruneLocked() {
	for k, e := range c.rows {
		if !e.used {
			delete(c.rows, k)
			continue
		}
		e.used = false
		c.rows[k] = e
	}
}

// listed records the size of a list just encoded.
func (c *rowEncodingCache) listed(n int) {
	c.mu.Lock()
	c.lastList = n
	c.mu.Unlock()
}

// encodeItem encodes a row as the JSON serializer's streaming list
// encoder encodes an item: encoding/json's Encoder (HTML escaped), without
// the newline it appends.
func encodeItem(row *v1alpha1.DownstreamCopy) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(row); err != nil {
		return nil, fmt.Errorf("encoding downstreamcopy %s/%s: %w", row.Namespace, row.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) write(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}
