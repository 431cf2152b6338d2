// Package rowname names the rows of Courier's computed views
// (downstreamcopies, fieldcopies): DNS subdomain names built from parts that
// may hold any character, the same on every replica and every restart.
package rowname

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// For joins parts with "." in lower case and makes the result a DNS
// subdomain: in each dot-separated label characters a name cannot hold
// become "-", labels start and end alphanumeric, and empty labels are
// dropped. A name over 253 characters is cut and ends in a hash of the
// whole (of names, never of a value), so it stays unique.
func For(parts ...string) string {
	full := strings.ToLower(strings.Join(parts, "."))
	s := sanitize(full)
	if len(s) <= validation.DNS1123SubdomainMaxLength {
		return s
	}
	sum := sha256.Sum256([]byte(full))
	suffix := hex.EncodeToString(sum[:])[:16]
	prefix := strings.TrimRight(s[:validation.DNS1123SubdomainMaxLength-len(suffix)-1], ".-")
	return prefix + "-" + suffix
}

func sanitize(s string) string {
	var labels []string
	for _, label := range strings.Split(s, ".") {
		b := []byte(label)
		for i, c := range b {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				b[i] = '-'
			}
		}
		if l := strings.Trim(string(b), "-"); l != "" {
			labels = append(labels, l)
		}
	}
	if len(labels) == 0 {
		return "x"
	}
	return strings.Join(labels, ".")
}

// hashLen is how many hex characters of a SHA-256 end a hashed name.
const hashLen = 16

// Unique names a row after parts so that two different part lists never
// share a name (docs/design.md#the-downstreamcopy-view: HelmOp "a.b" on Cluster "c" and HelmOp "a" on
// Cluster "b.c" are different rows). The exact rule:
//
//   - Plain: "p1.p2.….pn", when every part but the last is one DNS label
//     (non-empty; only a-z, 0-9 and "-"; starting and ending with a letter
//     or digit; so no dot), the last part is a DNS subdomain (it may hold
//     dots, like a Secret named "example.com-tls"), the whole is at most
//     253 characters, and its last label is not 16 hexadecimal digits.
//   - Hashed, otherwise: each part made readable (as For does, with dots
//     inside a part becoming "-" and an empty part "x"), joined with ".",
//     cut so the whole fits in 253 characters, then "." and the first 16
//     hex digits of a SHA-256 over the parts, each prefixed by its length.
//
// Plain names are distinct because the first n-1 labels are the first n-1
// parts and the rest is the last part. A hashed name always ends in a
// 16-hex-digit label, which no plain name does, and two hashed names of
// different parts differ unless SHA-256 collides in 64 bits. Parts are used
// as given: the caller lower-cases what the contract says is lower case.
func Unique(parts ...string) string {
	if plain := strings.Join(parts, "."); isPlain(parts, plain) {
		return plain
	}
	readable := make([]string, len(parts))
	for i, p := range parts {
		readable[i] = sanitize(strings.ReplaceAll(strings.ToLower(p), ".", "-"))
	}
	prefix := strings.Join(readable, ".")
	if max := validation.DNS1123SubdomainMaxLength - hashLen - 1; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], ".-")
	}
	return prefix + "." + partsHash(parts)
}

func isPlain(parts []string, joined string) bool {
	if len(parts) == 0 || len(joined) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	for _, p := range parts[:len(parts)-1] {
		if !isLabel(p) {
			return false
		}
	}
	last := strings.Split(parts[len(parts)-1], ".")
	for _, l := range last {
		if !isLabel(l) {
			return false
		}
	}
	return !isHashLabel(last[len(last)-1])
}

// isLabel reports whether s is a DNS-1123 label, without the 63-character
// limit (object names may hold longer labels).
func isLabel(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

func isHashLabel(s string) bool {
	if len(s) != hashLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// partsHash hashes the parts unambiguously: each is prefixed by its length,
// so ("a.b", "c") and ("a", "b.c") hash differently.
func partsHash(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLen]
}
