package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/downstream"
)

// FallbackServiceAccount is the ServiceAccount, in the agent namespace,
// that writes copies for a HelmOp naming none, when it exists downstream.
const FallbackServiceAccount = "fleet-default"

// identity is who writes a group of copies in one cluster.
type identity struct {
	// serviceAccount is "<namespace>/<name>", or "" for Courier's own
	// identity.
	serviceAccount string
	// writer is the client writes go through: impersonating the
	// ServiceAccount, or Courier's own.
	writer writeClient
	// grants holds what the ServiceAccount was recently allowed in this
	// cluster (nil for Courier's own identity).
	grants *impersonator
}

func (id identity) user() string {
	if id.serviceAccount == "" {
		return "Courier's own identity"
	}
	ns, name, _ := strings.Cut(id.serviceAccount, "/")
	return "ServiceAccount " + ns + "/" + name
}

// refused is told that the cluster refused a write by this identity: its
// cached "allowed" answers may be stale, so the next pass asks again.
func (id identity) refused() {
	if id.grants != nil {
		id.grants.forgetAllowed()
	}
}

// writeClient is what writes copies: core/v1 and authorization/v1 (the
// access reviews), as downstream.NewClientset builds them.
type writeClient = downstream.Clientset

// impersonators caches, per cluster, one impersonating clientset per
// ServiceAccount together with the access answers it was given. A
// cluster's entries live as long as its downstream.Client: a rebuilt client
// (new kubeconfig) replaces them, a forgotten cluster drops them, and no
// cluster's entries are ever touched by another's.
type impersonators struct {
	// newClient builds a client from a config that impersonates; nil
	// means downstream.NewClientset (tests put fakes here).
	newClient func(*rest.Config) (writeClient, error)

	// mu guards clusters and their sas maps; it is never held while a
	// clientset is built or a request is made, so clusters do not wait for
	// each other.
	mu       sync.Mutex
	clusters map[string]*clusterImpersonators // by downstream.Client.Key
}

// clusterImpersonators is what is cached for one cluster client.
type clusterImpersonators struct {
	client *downstream.Client       // the client the entries were built from
	sas    map[string]*impersonator // by "<namespace>/<name>"
}

// impersonator is one ServiceAccount in one cluster.
type impersonator struct {
	writer writeClient

	mu sync.Mutex
	// allowed is when each access was last answered "allowed". Denials are
	// never stored: they are asked again on every pass.
	allowed map[access]time.Time
}

// get returns the ServiceAccount's impersonator in the cluster of c,
// building its clientset on first use and after c's cluster client was
// rebuilt.
func (i *impersonators) get(c *downstream.Client, sa string) (*impersonator, error) {
	if p := i.lookup(c, sa); p != nil {
		return p, nil
	}
	ns, name, _ := strings.Cut(sa, "/")
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	newClient := i.newClient
	if newClient == nil {
		newClient = downstream.NewClientset
	}
	cl, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	entry := i.entry(c)
	if p, ok := entry.sas[sa]; ok {
		return p, nil // built meanwhile by another pass over the cluster
	}
	p := &impersonator{writer: cl, allowed: map[access]time.Time{}}
	entry.sas[sa] = p
	return p, nil
}

// lookup returns the cached impersonator, or nil.
func (i *impersonators) lookup(c *downstream.Client, sa string) *impersonator {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.entry(c).sas[sa]
}

// entry returns the cluster's entry for client c, replacing one built from
// an earlier client of the same cluster. Called with mu held.
func (i *impersonators) entry(c *downstream.Client) *clusterImpersonators {
	if i.clusters == nil {
		i.clusters = map[string]*clusterImpersonators{}
	}
	entry, ok := i.clusters[c.Key]
	if !ok || entry.client != c {
		entry = &clusterImpersonators{client: c, sas: map[string]*impersonator{}}
		i.clusters[c.Key] = entry
	}
	return entry
}

// forget drops a cluster's impersonators.
func (i *impersonators) forget(clusterKey string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.clusters, clusterKey)
}

// accessTTL is how long an "allowed" answer to an access review is reused.
// Without it every write pass asked one SelfSubjectAccessReview per access
// a group needs, in every cluster -- most of the requests Courier made at
// a thousand clusters. Reusing an allow cannot let a write through that
// the cluster forbids (the API server still authorizes each write). A
// right revoked within the TTL is found by a refused write instead of by
// the check -- so that pass may leave its group half written, as a right
// revoked between check and write always could -- and the refusal drops
// the identity's cached answers (identity.refused), so the retry checks
// again. Denials are never cached: a right granted later is noticed at the
// next retry.
const accessTTL = 5 * time.Minute

// isAllowed reports whether a was answered "allowed" less than accessTTL
// before now.
func (p *impersonator) isAllowed(a access, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.allowed[a]
	if ok && now.Sub(at) >= accessTTL {
		delete(p.allowed, a)
		return false
	}
	return ok
}

// answered records the cluster's answer for a: an allow is kept, a denial
// drops any earlier allow.
func (p *impersonator) answered(a access, allowed bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if allowed {
		p.allowed[a] = now
	} else {
		delete(p.allowed, a)
	}
}

// forgetAllowed drops every cached answer.
func (p *impersonator) forgetAllowed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.allowed)
}

// forgetIdentities drops what was cached for writing in a cluster: its
// impersonating clients, their access answers and its fallback answer.
// Called when the Cluster is gone.
func (e *Engine) forgetIdentities(clusterKey string) {
	e.impersonate.forget(clusterKey)
	e.fallbacks.forget(clusterKey)
}

// resolveIdentity picks who writes copies for a row (docs/design.md#permissions): the
// target's ServiceAccount, else FallbackServiceAccount in the agent
// namespace if it exists in the cluster, else Courier's own identity --
// unless a ServiceAccount is required. fallbackExists memoises the lookup
// for one pass.
func (e *Engine) resolveIdentity(ctx context.Context, client *downstream.Client, sa string, fallbackExists func() (bool, error)) (identity, string, error) {
	if sa == "" {
		ok, err := fallbackExists()
		if err != nil {
			return identity{}, "", err
		}
		if ok {
			sa = e.cfg.AgentNamespace + "/" + FallbackServiceAccount
		}
	}
	if sa == "" {
		if e.cfg.RequireServiceAccount {
			return identity{}, fmt.Sprintf("a ServiceAccount is required (--require-service-account): the HelmOp names none and %s/%s does not exist in the cluster",
				e.cfg.AgentNamespace, FallbackServiceAccount), nil
		}
		return identity{writer: client.Kube}, "", nil
	}
	p, err := e.impersonate.get(client, sa)
	if err != nil {
		return identity{}, "", err
	}
	return identity{serviceAccount: sa, writer: p.writer, grants: p}, "", nil
}

// fallbackTTL is how long the answer to "does the fallback ServiceAccount
// exist in this cluster?" is reused: every write pass would otherwise ask
// again (at 1,000 Clusters, one GET per Cluster on every source change,
// beside the one write the change needs). One created or deleted later is
// picked up within this time, as a changed RBAC grant is (accessTTL); a
// refused write asks again at once (identity.refused).
const fallbackTTL = accessTTL

// fallbackAnswers remembers, per cluster, whether the fallback
// ServiceAccount existed and when that was asked. An answer holds for the
// cluster client it was asked through: a rebuilt client asks again.
type fallbackAnswers struct {
	mu      sync.Mutex
	answers map[string]fallbackAnswer // by downstream.Client.Key
}

type fallbackAnswer struct {
	client *downstream.Client
	exists bool
	at     time.Time
	// refreshing is set while an answer past fallbackTTL is asked again
	// in the background.
	refreshing bool
}

// forget drops a cluster's answer.
func (f *fallbackAnswers) forget(clusterKey string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.answers, clusterKey)
}

// fallbackLookup returns a check for the fallback ServiceAccount that asks
// the cluster at most once per fallbackTTL. An answer older than that is
// still used for the pass that finds it, while it is asked again in the
// background: at 1,000 Clusters every pass after the TTL would otherwise
// wait for one more round trip before its write (a quarter of the passes
// of a one-source change in `make bench` at N=1,000). Using the old answer
// once more is what a pass a moment earlier would have done; a write it
// gets wrong is refused, which forgets the answer (identity.refused).
func (e *Engine) fallbackLookup(ctx context.Context, client *downstream.Client) func() (bool, error) {
	return func() (bool, error) {
		f := &e.fallbacks
		f.mu.Lock()
		a, ok := f.answers[client.Key]
		ok = ok && a.client == client
		stale := ok && e.now().Sub(a.at) >= fallbackTTL
		refresh := stale && !a.refreshing
		if refresh {
			a.refreshing = true
			f.answers[client.Key] = a
		}
		f.mu.Unlock()
		switch {
		case refresh:
			go func() { _, _ = e.askFallback(context.WithoutCancel(ctx), client) }()
			return a.exists, nil
		case ok:
			return a.exists, nil
		}
		return e.askFallback(ctx, client)
	}
}

// askFallback asks the cluster whether the fallback ServiceAccount exists
// and keeps the answer.
func (e *Engine) askFallback(ctx context.Context, client *downstream.Client) (bool, error) {
	f := &e.fallbacks
	var a fallbackAnswer
	_, err := client.Kube.CoreV1().ServiceAccounts(e.cfg.AgentNamespace).Get(ctx, FallbackServiceAccount, metav1.GetOptions{})
	switch {
	case err == nil:
		a = fallbackAnswer{client: client, exists: true, at: e.now()}
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		a = fallbackAnswer{client: client, exists: false, at: e.now()}
	default:
		f.mu.Lock()
		if old, ok := f.answers[client.Key]; ok && old.client == client {
			old.refreshing = false // the next pass asks again
			f.answers[client.Key] = old
		}
		f.mu.Unlock()
		return false, err
	}
	f.mu.Lock()
	if f.answers == nil {
		f.answers = map[string]fallbackAnswer{}
	}
	f.answers[client.Key] = a // replaces an answer from an earlier client
	f.mu.Unlock()
	return a.exists, nil
}

// access is one permission a group of writes needs.
type access struct {
	verb, resource, namespace, name string
}

// checkAccess asks the cluster, as the writing ServiceAccount, whether it
// may do everything the group's writes need (SelfSubjectAccessReview, which
// any identity may create). Checking first means a forbidden write leaves
// nothing half done: either every copy of the group can be written, or none
// is. An access answered "allowed" less than accessTTL ago is not asked
// again; a denied one always is. It returns a message naming what is
// missing, or "".
func (e *Engine) checkAccess(ctx context.Context, id identity, needs []access) (string, error) {
	if id.serviceAccount == "" {
		return "", nil
	}
	sort.Slice(needs, func(i, j int) bool {
		a, b := needs[i], needs[j]
		return a.namespace+a.resource+a.verb+a.name < b.namespace+b.resource+b.verb+b.name
	})
	var missing []string
	seen := map[access]bool{}
	for _, n := range needs {
		if seen[n] {
			continue
		}
		seen[n] = true
		if id.grants != nil && id.grants.isAllowed(n, e.now()) {
			continue
		}
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: n.verb, Resource: n.resource, Namespace: n.namespace, Name: n.name},
		}}
		res, err := id.writer.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		if id.grants != nil {
			id.grants.answered(n, res.Status.Allowed, e.now())
		}
		if !res.Status.Allowed {
			switch {
			case n.resource == "namespaces":
				missing = append(missing, fmt.Sprintf("create the missing namespace %s", n.name))
			default:
				missing = append(missing, fmt.Sprintf("%s %s in namespace %s", n.verb, n.resource, n.namespace))
			}
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	return fmt.Sprintf("forbidden: %s may not %s; nothing was written", id.user(), strings.Join(missing, ", ")), nil
}
