package engine

import (
	"sync"

	"github.com/courier-dev/courier/pkg/downstream"
)

// clientRecord is what the engine knows of each Cluster's downstream
// client from the passes made with it: the client the last pass ended with
// (createUnread, scope.go), the kube-apiserver it reaches (twins.go) and
// the client whose sweep has already looked for copies written before the
// cluster-hash label existed (early.go, sweep.go). Each answer holds for
// one client only: a new client (a new kubeconfig) starts afresh. It has
// its own lock and calls out to nothing while holding it.
type clientRecord struct {
	mu sync.Mutex
	// passed is, per Cluster, the client a pass last ended with.
	passed map[string]*downstream.Client
	// servers is each Cluster's kube-apiserver URL, as of its last pass.
	servers map[string]string
	// legacy is, per Cluster, the client whose sweep has already looked
	// for copies written before the cluster-hash label existed.
	legacy map[string]*downstream.Client
}

func newClientRecord() *clientRecord {
	return &clientRecord{
		passed:  map[string]*downstream.Client{},
		servers: map[string]string{},
		legacy:  map[string]*downstream.Client{},
	}
}

// passEnded records that a pass over client's cluster ended (its copies
// were all handled, whatever their outcome).
func (r *clientRecord) passEnded(client *downstream.Client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passed[client.Key] = client
}

// passedBefore reports whether a pass over client's cluster with client
// has ended.
func (r *clientRecord) passedBefore(client *downstream.Client) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.passed[client.Key] == client
}

// setServer records the kube-apiserver a Cluster's client reaches.
func (r *clientRecord) setServer(clusterKey string, client *downstream.Client) {
	if client == nil || client.Config == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.servers[clusterKey] = client.Config.Host
}

// reachesServer reports whether one of clusterKeys reaches the
// kube-apiserver host.
func (r *clientRecord) reachesServer(host string, clusterKeys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range clusterKeys {
		if r.servers[key] == host {
			return true
		}
	}
	return false
}

// needsLegacySweep reports whether the sweep of this Cluster with this
// client must still look for copies that carry no cluster-hash label.
func (r *clientRecord) needsLegacySweep(clusterKey string, client *downstream.Client) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.legacy[clusterKey] != client
}

// legacySwept records that the look for unlabelled copies is done for this
// client: every such copy was relabelled by its pass or removed.
func (r *clientRecord) legacySwept(clusterKey string, client *downstream.Client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.legacy[clusterKey] = client
}

// forget drops what was known of a Cluster that is gone (or now pulled).
func (r *clientRecord) forget(clusterKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.servers, clusterKey)
	delete(r.legacy, clusterKey)
	delete(r.passed, clusterKey)
}
