package copyview

import "github.com/courier-dev/courier/pkg/rowname"

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
	return rowname.For(parts...)
}
