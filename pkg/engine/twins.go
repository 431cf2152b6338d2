package engine

import (
	"slices"

	"github.com/courier-dev/courier/pkg/downstream"
)

// Several Fleet Clusters may reach one kube-apiserver: a cluster registered
// twice, the local cluster in two workspaces (DESIGN §3 rule 11). Each
// copy names the one Cluster it was written for (its cluster-hash label),
// and each Cluster's watch and sweep see only the copies that name it. So
// a copy one Cluster no longer wants may still be wanted by a twin that
// reaches the same kube-apiserver: the sweep leaves such a copy in place
// rather than delete it and have the twin write it again.
//
// Twins are recognised by the server URL of their kubeconfigs. Two URLs
// for one kube-apiserver (an IP and a name, say) are not recognised: the
// copy is removed and the twin's next pass writes it again.

// twinState is the engine's record of which Cluster wants which copy and
// which server each Cluster reaches. Guarded by Engine.mu.
type twinState struct {
	// wantedBy maps a copyID to the keys of the Clusters whose rows want
	// it, kept in step by every SetDesired.
	wantedBy map[string][]string
	// servers is each Cluster's kube-apiserver URL, as of its last pass.
	servers map[string]string
	// legacy is, per Cluster, the client whose sweep has already looked
	// for copies written before the cluster-hash label existed.
	legacy map[string]*downstream.Client
}

// indexWanted updates wantedBy for one HelmOp whose copies go from prev to
// next (both by cluster key); the other HelmOps' entries are not touched.
// Called with e.mu held.
func (e *Engine) indexWanted(prev, next map[string][]desiredCopy) {
	if e.twins.wantedBy == nil {
		e.twins.wantedBy = map[string][]string{}
	}
	for clusterKey, copies := range prev {
		for _, c := range copies {
			id := copyID(c.helmOp, c.kind, c.targetNS, c.name)
			keys := e.twins.wantedBy[id]
			if i := slices.Index(keys, clusterKey); i >= 0 {
				keys = slices.Delete(keys, i, i+1)
			}
			if len(keys) == 0 {
				delete(e.twins.wantedBy, id)
			} else {
				e.twins.wantedBy[id] = keys
			}
		}
	}
	for clusterKey, copies := range next {
		for _, c := range copies {
			id := copyID(c.helmOp, c.kind, c.targetNS, c.name)
			e.twins.wantedBy[id] = append(e.twins.wantedBy[id], clusterKey)
		}
	}
}

// setServer records the kube-apiserver a Cluster's client reaches.
func (e *Engine) setServer(clusterKey string, client *downstream.Client) {
	if client == nil || client.Config == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.twins.servers == nil {
		e.twins.servers = map[string]string{}
	}
	e.twins.servers[clusterKey] = client.Config.Host
}

// wantedByTwin reports whether a Cluster other than clusterKey, reaching
// the same kube-apiserver as client, wants the copy id.
func (e *Engine) wantedByTwin(clusterKey string, client *downstream.Client, id string) bool {
	if client == nil || client.Config == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, other := range e.twins.wantedBy[id] {
		if other != clusterKey && e.twins.servers[other] == client.Config.Host {
			return true
		}
	}
	return false
}

// needsLegacySweep reports whether the sweep of this Cluster with this
// client must still look for copies that carry no cluster-hash label.
func (e *Engine) needsLegacySweep(clusterKey string, client *downstream.Client) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.twins.legacy[clusterKey] != client
}

// legacySwept records that the look for unlabelled copies is done for this
// client: every such copy was relabelled by its pass or removed.
func (e *Engine) legacySwept(clusterKey string, client *downstream.Client) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.twins.legacy == nil {
		e.twins.legacy = map[string]*downstream.Client{}
	}
	e.twins.legacy[clusterKey] = client
}

// forgetTwin drops what the engine knew of a deleted Cluster.
func (e *Engine) forgetTwin(clusterKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.twins.servers, clusterKey)
	delete(e.twins.legacy, clusterKey)
	delete(e.passed, clusterKey)
}
