package agentauth

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/delivery"
	"github.com/courier-dev/courier/pkg/memstore"
)

// agentIndex indexes Clusters by the user of their agent, as delivery.Of
// answers it (docs/design.md#pull-delivery).
const agentIndex = "courier.dev/agent"

// ClusterIndex answers Agents from the Fleet Cluster informer, through an
// index of its cache by annotation value: a lookup costs no list.
type ClusterIndex struct {
	informer cache.SharedIndexInformer
}

var _ Agents = &ClusterIndex{}

// NewClusterIndex adds the agent index to the Cluster informer. Call it
// before the informer starts.
func NewClusterIndex(informer cache.SharedIndexInformer) (*ClusterIndex, error) {
	if err := informer.AddIndexers(cache.Indexers{agentIndex: agentOf}); err != nil {
		return nil, fmt.Errorf("indexing Clusters by their agent's user: %w", err)
	}
	return &ClusterIndex{informer: informer}, nil
}

// agentOf is the index function: the user of a Cluster's agent when
// delivery.Of says the Cluster is pulled. A pushed Cluster (an empty agent
// annotation included) and one that nobody delivers (a malformed one) have
// no agent: no user may read their payloads.
func agentOf(obj any) ([]string, error) {
	c, ok := obj.(*fleet.Cluster)
	if !ok {
		return nil, nil
	}
	if a := delivery.Of(c); a.Pulled() {
		return []string{a.Agent}, nil
	}
	return nil, nil
}

// ClustersOf implements Agents.
func (x *ClusterIndex) ClustersOf(username string) []types.NamespacedName {
	objs, err := x.informer.GetIndexer().ByIndex(agentIndex, username)
	if err != nil {
		return nil
	}
	out := make([]types.NamespacedName, 0, len(objs))
	for _, o := range objs {
		if c, ok := o.(*fleet.Cluster); ok {
			out = append(out, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
		}
	}
	return out
}

// HasSynced implements Agents.
func (x *ClusterIndex) HasSynced() bool { return x.informer.HasSynced() }

// StoreRows answers Rows from the store downstreamcopies are served from.
type StoreRows struct {
	Store *memstore.Store[*courier.DownstreamCopy]
}

var _ Rows = StoreRows{}

// ClusterOf implements Rows.
func (s StoreRows) ClusterOf(namespace, name string) (string, bool) {
	row, ok := s.Store.Get(namespace, name)
	if !ok {
		return "", false
	}
	return row.Spec.Cluster, true
}

// WithDelegate returns the authorizer Courier serves with: a first, then
// for an agent's own requests the allow cache (allowcache.go), then
// delegate. a only denies or has no opinion, and the cache only allows
// what delegate allowed for every name, so what a lets through is decided
// by delegate (union semantics: the first Allow or Deny wins). A zero
// allowTTL leaves the cache out: delegate decides every request.
func WithDelegate(a *Authorizer, delegate authorizer.Authorizer, allowTTL time.Duration) (authorizer.Authorizer, error) {
	return withDelegateAndClock(a, delegate, delegate, allowTTL, clock.RealClock{})
}

// WithReviewer is WithDelegate with the allow cache's coarse question asked
// of reviewer rather than delegate: an authorizer that asks the same
// upstream (a SubjectAccessReview) through a client of its own. The
// delegated authorizer's client is limited to 200 reviews a second, and
// each agent that reconnects to a replica whose cache does not know it
// costs one: 10,000 agents moving to a restarted replica waited 50 s for
// their reviews (docs/pull.md).
func WithReviewer(a *Authorizer, delegate, reviewer authorizer.Authorizer, allowTTL time.Duration) (authorizer.Authorizer, error) {
	return withDelegateAndClock(a, delegate, reviewer, allowTTL, clock.RealClock{})
}

func withDelegateAndClock(a *Authorizer, delegate, reviewer authorizer.Authorizer, allowTTL time.Duration, clk clock.PassiveClock) (authorizer.Authorizer, error) {
	if delegate == nil {
		return nil, fmt.Errorf("the agent authorizer needs an authorizer to delegate to")
	}
	if reviewer == nil {
		return nil, fmt.Errorf("the agents' allow cache needs an authorizer to ask")
	}
	if allowTTL < 0 {
		return nil, fmt.Errorf("the agents' allow cache TTL must not be negative, got %s", allowTTL)
	}
	chain := []union.NamedAuthorizer{{AuthorizerName: "courier.dev/agents", Authorizer: a}}
	if allowTTL > 0 {
		chain = append(chain, union.NamedAuthorizer{AuthorizerName: "courier.dev/agents-allow-cache", Authorizer: newAllowCache(a, reviewer, allowTTL, clk)})
	}
	chain = append(chain, union.NamedAuthorizer{AuthorizerName: "delegated", Authorizer: delegate})
	return union.New(chain...)
}
