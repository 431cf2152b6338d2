package copyview

import (
	"strings"

	"github.com/courier-dev/courier/pkg/rowname"
)

// RowName returns the name of the DownstreamCopy row for one listed resource
// of one HelmOp in one cluster: <helmop>.<cluster>.<kind>.<name>, the kind
// in lower case (docs/design.md#the-downstreamcopy-view), by rowname.Unique's rule: plain when the
// HelmOp, Cluster and kind are single DNS labels and the source name a valid
// object name, otherwise readable parts and a hash of the exact parts. Two
// different (HelmOp, Cluster, kind, name) never share a name, and every
// replica names a row the same way.
func RowName(helmOp, cluster, kind, name string) string {
	return rowname.Unique(helmOp, cluster, strings.ToLower(kind), name)
}
