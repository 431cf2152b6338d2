// Package copydigest lets a cache hold a copy's data as a digest instead of
// the data itself.
//
// Courier's downstream informers cache every copy it wrote, so that a pass
// can tell without a request whether a copy is still what its source says.
// Holding the copies' data for that made Courier's memory grow with the
// size of what it copies times the number of Clusters: 10,000 copies of a
// 64 KiB Secret are 640 MB of data, decoded and kept, where a digest is 32
// bytes each. The informers replace the data of each copy with its digest
// before caching it (ReplaceSecretData, ReplaceConfigMapData); the
// comparisons in pkg/copyspec take either form (SecretDataEqual,
// ConfigMapDataEqual).
//
// The digest is an HMAC-SHA256 under a key drawn at random when the process
// starts: it is only ever compared within the process that made it, and
// means nothing outside it, so that not even a digest of secret data could
// be guessed from if it reached a log. It is kept under Key, which no data
// key of a real object can be (the API server allows only
// [-._a-zA-Z0-9]+).
package copydigest

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Key holds the digest in place of the data: in a Secret's data, or in a
// ConfigMap's binaryData (its data is then empty).
const Key = "courier.dev/data-digest"

// processKey keys every digest this process makes.
var processKey = func() []byte {
	k := make([]byte, sha256.Size)
	if _, err := rand.Read(k); err != nil {
		panic("copydigest: no randomness for the digest key: " + err.Error())
	}
	return k
}()

// summer is one digest's state, kept in a pool: an informer digests every
// watch event of a copy, and a pass every copy it compares, so a fresh
// HMAC and sorted key list for each was most of what digesting allocated.
type summer struct {
	mac     hash.Hash
	keys    []string
	scratch []byte
}

var summers = newSummers()

func newSummers() *sync.Pool {
	return &sync.Pool{New: func() any { return &summer{mac: hmac.New(sha256.New, processKey)} }}
}

// ReplaceSecretData replaces s's data with its digest (a Secret read from
// the API server has no stringData; any is dropped too). It leaves a digest
// alone: an informer's transform must be idempotent, and client-go applies
// it twice to what a streaming list (WatchList) delivers.
func ReplaceSecretData(s *corev1.Secret) {
	if !Digested(s.Data) {
		s.Data = map[string][]byte{Key: sum(nil, s.Data)}
	}
	s.StringData = nil
}

// ReplaceConfigMapData replaces c's data and binaryData with their digest,
// leaving a digest alone (see ReplaceSecretData).
func ReplaceConfigMapData(c *corev1.ConfigMap) {
	if _, ok := configMapDigestOf(c.Data, c.BinaryData); ok {
		return
	}
	c.BinaryData = map[string][]byte{Key: sum(c.Data, c.BinaryData)}
	c.Data = nil
}

// SecretDataEqual reports whether a Secret's data cur, as read or as
// ReplaceSecretData left it, equals want. A nil map equals an empty one.
func SecretDataEqual(cur, want map[string][]byte) bool {
	if d, ok := digestOf(cur); ok {
		return hmac.Equal(d, sum(nil, want))
	}
	return maps.EqualFunc(cur, want, bytes.Equal)
}

// ConfigMapDataEqual reports whether a ConfigMap's data and binaryData,
// as read or as ReplaceConfigMapData left them, equal want's.
func ConfigMapDataEqual(curData map[string]string, curBinary map[string][]byte, wantData map[string]string, wantBinary map[string][]byte) bool {
	if d, ok := configMapDigestOf(curData, curBinary); ok {
		return hmac.Equal(d, sum(wantData, wantBinary))
	}
	return maps.Equal(curData, wantData) && maps.EqualFunc(curBinary, wantBinary, bytes.Equal)
}

// Digested reports whether m is a digest left by ReplaceSecretData or
// ReplaceConfigMapData rather than data.
func Digested(m map[string][]byte) bool {
	_, ok := digestOf(m)
	return ok
}

func digestOf(m map[string][]byte) ([]byte, bool) {
	d, ok := m[Key]
	return d, ok && len(m) == 1
}

// configMapDigestOf is digestOf for a ConfigMap, whose digest is in its
// binaryData with its data empty (ReplaceConfigMapData).
func configMapDigestOf(data map[string]string, binary map[string][]byte) ([]byte, bool) {
	d, ok := digestOf(binary)
	return d, ok && len(data) == 0
}

// sum is the keyed digest of data and binary: every key in order, each
// entry tagged with the map it came from and its lengths, so that no two
// different contents write the same bytes.
func sum(data map[string]string, binary map[string][]byte) []byte {
	sm := summers.Get().(*summer)
	defer summers.Put(sm)
	sm.mac.Reset()
	for _, k := range sortedKeys(sm, data) {
		sm.entry('s', k, len(data[k]))
		sm.scratch = append(sm.scratch[:0], data[k]...)
		sm.mac.Write(sm.scratch)
	}
	for _, k := range sortedKeys(sm, binary) {
		sm.entry('b', k, len(binary[k]))
		sm.mac.Write(binary[k])
	}
	return sm.mac.Sum(nil)
}

// sortedKeys returns m's keys in order, in sm's reused slice.
func sortedKeys[V any](sm *summer, m map[string]V) []string {
	sm.keys = sm.keys[:0]
	for k := range m {
		sm.keys = append(sm.keys, k)
	}
	slices.Sort(sm.keys)
	return sm.keys
}

// entry writes an entry's tag, its key and its value's length.
func (sm *summer) entry(tag byte, k string, n int) {
	b := append(sm.scratch[:0], tag)
	b = binary.AppendUvarint(b, uint64(len(k)))
	b = append(b, k...)
	b = binary.AppendUvarint(b, uint64(n))
	sm.scratch = b
	sm.mac.Write(b)
}
