package copydigest

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSecretDataEqual(t *testing.T) {
	data := map[string][]byte{"a": []byte("1"), "b": []byte("22")}
	tests := []struct {
		name string
		cur  map[string][]byte
		want map[string][]byte
		same bool
	}{
		{name: "same data", cur: data, want: map[string][]byte{"b": []byte("22"), "a": []byte("1")}, same: true},
		{name: "a value differs", cur: data, want: map[string][]byte{"a": []byte("1"), "b": []byte("23")}},
		{name: "a key more", cur: data, want: map[string][]byte{"a": []byte("1"), "b": []byte("22"), "c": nil}},
		{name: "a key renamed", cur: data, want: map[string][]byte{"a": []byte("1"), "c": []byte("22")}},
		{name: "bytes moved between entries", cur: data, want: map[string][]byte{"a": []byte("12"), "b": []byte("2")}},
		{name: "bytes moved from a key to its value", cur: map[string][]byte{"ab": []byte("")}, want: map[string][]byte{"a": []byte("b")}},
		// Without the key's length, "a1" and 48 bytes would write what "a"
		// and a 49-byte value starting with byte 48 write ('1' is 49).
		{name: "a key's last byte read as a length", cur: map[string][]byte{"a1": bytes.Repeat([]byte{7}, 48)},
			want: map[string][]byte{"a": append([]byte{48}, bytes.Repeat([]byte{7}, 48)...)}},
		// Without the values' lengths, one value could spell the next entry.
		{name: "a value holding the next entry", cur: map[string][]byte{"a": []byte("1b\x01b2")},
			want: map[string][]byte{"a": []byte("1"), "b": []byte("2")}},
		{name: "nil and empty", cur: nil, want: map[string][]byte{}, same: true},
		{name: "empty and an empty value", cur: nil, want: map[string][]byte{"a": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SecretDataEqual(tt.cur, tt.want); got != tt.same {
				t.Errorf("with the data: SecretDataEqual = %v, want %v", got, tt.same)
			}
			s := &corev1.Secret{Data: tt.cur, StringData: map[string]string{"x": "y"}}
			ReplaceSecretData(s)
			if !Digested(s.Data) || s.StringData != nil {
				t.Fatalf("ReplaceSecretData left data %v, stringData %v", s.Data, s.StringData)
			}
			if got := SecretDataEqual(s.Data, tt.want); got != tt.same {
				t.Errorf("with the digest: SecretDataEqual = %v, want %v", got, tt.same)
			}
			ReplaceSecretData(s) // again: an informer's transform runs twice on a streamed list
			if got := SecretDataEqual(s.Data, tt.want); got != tt.same {
				t.Errorf("digested twice: SecretDataEqual = %v, want %v", got, tt.same)
			}
		})
	}
}

func TestConfigMapDataEqual(t *testing.T) {
	type content struct {
		data   map[string]string
		binary map[string][]byte
	}
	base := content{data: map[string]string{"a": "1"}, binary: map[string][]byte{"b": {0, 1}}}
	tests := []struct {
		name      string
		cur, want content
		same      bool
	}{
		{name: "same", cur: base, want: content{data: map[string]string{"a": "1"}, binary: map[string][]byte{"b": {0, 1}}}, same: true},
		{name: "data differs", cur: base, want: content{data: map[string]string{"a": "2"}, binary: base.binary}},
		{name: "binaryData differs", cur: base, want: content{data: base.data, binary: map[string][]byte{"b": {0, 2}}}},
		{name: "an entry moved from data to binaryData", cur: content{data: map[string]string{"a": "1"}},
			want: content{binary: map[string][]byte{"a": []byte("1")}}},
		{name: "both empty", cur: content{}, want: content{data: map[string]string{}}, same: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ConfigMapDataEqual(tt.cur.data, tt.cur.binary, tt.want.data, tt.want.binary); got != tt.same {
				t.Errorf("with the data: ConfigMapDataEqual = %v, want %v", got, tt.same)
			}
			c := &corev1.ConfigMap{Data: tt.cur.data, BinaryData: tt.cur.binary}
			ReplaceConfigMapData(c)
			if c.Data != nil || !Digested(c.BinaryData) {
				t.Fatalf("ReplaceConfigMapData left data %v, binaryData %v", c.Data, c.BinaryData)
			}
			if got := ConfigMapDataEqual(c.Data, c.BinaryData, tt.want.data, tt.want.binary); got != tt.same {
				t.Errorf("with the digest: ConfigMapDataEqual = %v, want %v", got, tt.same)
			}
			ReplaceConfigMapData(c)
			if got := ConfigMapDataEqual(c.Data, c.BinaryData, tt.want.data, tt.want.binary); got != tt.same {
				t.Errorf("digested twice: ConfigMapDataEqual = %v, want %v", got, tt.same)
			}
		})
	}
}

// TestDigestHoldsNoData: the digest is the only entry left, and none of
// the data's bytes is in it.
func TestDigestHoldsNoData(t *testing.T) {
	secret := []byte(strings.Repeat("hunter2", 10))
	s := &corev1.Secret{Data: map[string][]byte{"password": secret}}
	ReplaceSecretData(s)
	if len(s.Data) != 1 || len(s.Data[Key]) != 32 {
		t.Fatalf("data after ReplaceSecretData = %v, want one 32-byte digest under %q", s.Data, Key)
	}
	if bytes.Contains(s.Data[Key], []byte("hunter2")) {
		t.Fatal("the digest holds the data")
	}
}

// TestDigestIsKeyedPerProcess: the same data digests differently under
// another key, so a digest means nothing outside the process that made it.
func TestDigestIsKeyedPerProcess(t *testing.T) {
	data := map[string][]byte{"a": []byte("1")}
	first := sum(nil, data)
	saved, savedSummers := processKey, summers
	defer func() { processKey, summers = saved, savedSummers }()
	processKey, summers = bytes.Repeat([]byte{7}, len(saved)), newSummers()
	if bytes.Equal(first, sum(nil, data)) {
		t.Fatal("the digest did not change with the key")
	}
}

// BenchmarkReplaceSecretData is what an informer's transform adds to each
// watch event of a copy of the benchmark's size (a 1 KiB payload and a
// round key), and SecretDataEqual what a pass adds to each comparison.
func BenchmarkReplaceSecretData(b *testing.B) {
	data := map[string][]byte{"payload": bytes.Repeat([]byte{1}, 1024), "round": []byte("r0")}
	b.ReportAllocs()
	for b.Loop() {
		ReplaceSecretData(&corev1.Secret{Data: data})
	}
}

func BenchmarkSecretDataEqual(b *testing.B) {
	data := map[string][]byte{"payload": bytes.Repeat([]byte{1}, 1024), "round": []byte("r0")}
	s := &corev1.Secret{Data: data}
	ReplaceSecretData(s)
	b.ReportAllocs()
	for b.Loop() {
		if !SecretDataEqual(s.Data, data) {
			b.Fatal("not equal")
		}
	}
}
