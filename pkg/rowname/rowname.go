// Package rowname names the rows of Courier's computed views
// (downstreamcopies, fieldcopies): DNS subdomain names built from parts that
// may hold any character, the same on every replica and every restart.
package rowname

import (
	"crypto/sha256"
	"encoding/hex"
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
