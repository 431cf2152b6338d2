package engine

import (
	"slices"

	"github.com/courier-dev/courier/pkg/downstream"
)

// Several Fleet Clusters may reach one kube-apiserver: a cluster registered
// twice, the local cluster in two workspaces (docs/design.md#clusters-sharing-a-kube-apiserver). Each
// copy names the one Cluster it was written for (its cluster-hash label),
// and each Cluster's watch and sweep see only the copies that name it. So
// a copy one Cluster no longer wants may still be wanted by a twin that
// reaches the same kube-apiserver: the sweep leaves such a copy in place
// rather than delete it and have the twin write it again.
//
// Twins are recognised by the server URL of their kubeconfigs. Two URLs
// for one kube-apiserver (an IP and a name, say) are not recognised: the
// copy is removed and the twin's next pass writes it again.
//
// Which Cluster wants which copy is the desired set's (desiredSet.wantedBy,
// kept in step by every SetDesired); which server each Cluster reaches is
// the client record's (clientRecord.servers, as of each Cluster's last
// pass). wantedByTwin asks one, then the other, never holding both locks.

// wantedByTwin reports whether a Cluster other than clusterKey, reaching
// the same kube-apiserver as client, wants the copy id.
func (e *Engine) wantedByTwin(clusterKey string, client *downstream.Client, id string) bool {
	if client == nil || client.Config == nil {
		return false
	}
	others := slices.DeleteFunc(e.desired.wantedByClusters(id), func(k string) bool { return k == clusterKey })
	return len(others) > 0 && e.clients.reachesServer(client.Config.Host, others)
}
