package agentauth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// An agent's requests are few kinds repeated: its watch and list, a GET of
// each payload, an update of each row's status at least once per report
// interval (its heartbeat). The delegated authorizer asks the upstream a
// SubjectAccessReview per distinct request, naming the row, and keeps an
// allowed answer 10 s (--authorization-webhook-cache-authorized-ttl) in a
// cache of 8,192 answers: shorter than a report interval, and smaller than
// the rows of a fleet. At 10,000 agents every heartbeat cost a review, a
// second request to the upstream for each one the agent sent.
//
// The allow cache asks the upstream the coarser question instead -- may
// this user <verb> downstreamcopies[/<subresource>] in the namespace, any
// name, any selector -- and keeps an allowed answer per user, verb,
// namespace and subresource for its TTL. An allow for every name covers each
// name (RBAC matches resourceNames only against a named request; a selector
// only narrows a list), so it allows nothing the upstream would refuse. When
// the coarse answer is not an allow, the delegated authorizer decides the
// request itself, as before, so a Role that names rows still works.
//
// Only requests the agent authorizer has already narrowed to the agent's own
// Cluster reach it; it never answers for anyone else, and a payload stays
// refused to anyone but the agent of the row's Cluster whatever is cached.
// Revoking an agent's upstream RBAC takes effect at once for requests through
// the aggregator (the kube-apiserver authorizes each before it proxies it),
// and within the TTL for requests sent to Courier directly.

// DefaultAllowCacheTTL is how long an agent's allowed coarse answer is kept:
// the kube-apiserver's own default for its webhook authorizer's allowed
// answers, ten default report intervals.
const DefaultAllowCacheTTL = 5 * time.Minute

// allowCacheSize bounds the answers kept: about five request kinds per
// agent, for 10,000 agents, in well under 10 MB.
const allowCacheSize = 64 * 1024

var (
	allowCacheTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "courier",
		Name:           "agent_authorization_cache_total",
		Help:           "Agents' requests to their own Cluster's rows by the answer of the allow cache: hit (allowed from the cache, no SubjectAccessReview), miss_allowed (the upstream allowed the coarse question, now cached), miss_delegated (it did not; the delegated authorizer decided the request itself).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	registerAllowCacheOnce sync.Once
)

// allowCache is the authorizer between the agent authorizer and the
// delegated one: Allow from cache for an agent's own requests, NoOpinion
// for everything else.
type allowCache struct {
	agents *Authorizer
	// reviewer answers the coarse question: the delegated authorizer,
	// or one asking the same upstream through a client of its own
	// (WithReviewer).
	reviewer authorizer.Authorizer
	ttl      time.Duration
	answers  *utilcache.LRUExpireCache
}

var _ authorizer.Authorizer = &allowCache{}

func newAllowCache(agents *Authorizer, reviewer authorizer.Authorizer, ttl time.Duration, clock utilcache.Clock) *allowCache {
	registerAllowCacheOnce.Do(func() { legacyregistry.MustRegister(allowCacheTotal) })
	return &allowCache{
		agents:   agents,
		reviewer: reviewer,
		ttl:      ttl,
		answers:  utilcache.NewLRUExpireCacheWithClock(allowCacheSize, clock),
	}
}

// Authorize implements authorizer.Authorizer: DecisionAllow or
// DecisionNoOpinion, never Deny.
func (c *allowCache) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if !c.agents.ownRequest(attrs) {
		return authorizer.DecisionNoOpinion, "", nil
	}
	key := coarseKey(attrs)
	if _, ok := c.answers.Get(key); ok {
		allowCacheTotal.WithLabelValues("hit").Inc()
		return authorizer.DecisionAllow, "", nil
	}
	decision, reason, err := c.reviewer.Authorize(ctx, coarse(attrs))
	if decision != authorizer.DecisionAllow || err != nil {
		allowCacheTotal.WithLabelValues("miss_delegated").Inc()
		return authorizer.DecisionNoOpinion, "", nil
	}
	allowCacheTotal.WithLabelValues("miss_allowed").Inc()
	c.answers.Add(key, struct{}{}, c.ttl)
	return authorizer.DecisionAllow, reason, nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: the cache
// keeps only unconditional allows.
func (c *allowCache) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(c.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: there are no
// conditions to evaluate, so it fails closed.
func (c *allowCache) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// coarse is the question asked for attrs: the same user, verb, namespace,
// resource and subresource, for every name and without selectors.
func coarse(attrs authorizer.Attributes) authorizer.Attributes {
	return authorizer.AttributesRecord{
		User:            attrs.GetUser(),
		Verb:            attrs.GetVerb(),
		Namespace:       attrs.GetNamespace(),
		APIGroup:        attrs.GetAPIGroup(),
		APIVersion:      attrs.GetAPIVersion(),
		Resource:        attrs.GetResource(),
		Subresource:     attrs.GetSubresource(),
		ResourceRequest: true,
	}
}

// coarseKey identifies the coarse question of attrs: everything of the
// user the upstream may decide by (name, UID, groups, extra) and the
// question's own fields, each written with its length so that no two
// questions write the same bytes. It is a digest so that a key costs 32
// bytes whatever the user's groups.
func coarseKey(attrs authorizer.Attributes) [sha256.Size]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	count := func(c int) { h.Write(n[:binary.PutUvarint(n[:], uint64(c))]) }
	field := func(s string) {
		count(len(s))
		h.Write([]byte(s))
	}
	u := attrs.GetUser()
	field(u.GetName())
	field(u.GetUID())
	count(len(u.GetGroups()))
	for _, g := range u.GetGroups() {
		field(g)
	}
	extra := u.GetExtra()
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	count(len(keys))
	for _, k := range keys {
		field(k)
		count(len(extra[k]))
		for _, v := range extra[k] {
			field(v)
		}
	}
	for _, s := range []string{attrs.GetVerb(), attrs.GetNamespace(), attrs.GetAPIGroup(), attrs.GetAPIVersion(), attrs.GetResource(), attrs.GetSubresource()} {
		field(s)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}
