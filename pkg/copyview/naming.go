package copyview

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// RowName returns the name of the DownstreamCopy row for one listed resource
// of one HelmOp in one cluster: <helmop>.<cluster>.<kind>.<name> in lower
// case (DESIGN §4). Characters a name cannot hold become "-". A name longer
// than 253 characters is cut and ends in a hash of the whole, so it stays
// unique and deterministic (every replica names a row the same way).
func RowName(helmOp, cluster, kind, name string) string {
	parts := []string{helmOp, cluster, kind, name}
	for i, p := range parts {
		if p == "" {
			parts[i] = "empty"
		}
	}
	return objectName(strings.Join(parts, "."))
}

// objectName makes s a valid DNS subdomain name.
func objectName(s string) string {
	full := sanitize(strings.ToLower(s))
	if len(full) <= validation.DNS1123SubdomainMaxLength {
		return full
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:])[:16]
	prefix := strings.TrimRight(full[:validation.DNS1123SubdomainMaxLength-len(suffix)-1], ".-")
	return prefix + "-" + suffix
}

// sanitize keeps [a-z0-9.-], turns anything else into "-", and makes the
// first and last characters alphanumeric.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), ".-")
	if out == "" {
		return "x"
	}
	return out
}
