// Package resources turns k8s-copier's RESOURCE[.VERSION[.GROUP]] names
// (singular, plural or kind: secret, deployments, deployments.v1.apps,
// Deployment) into resources the API server serves, by discovery. The
// discovery cache is refreshed when a name is not found, at most once per
// interval, so a CRD installed after Courier started resolves without a
// restart and a stream of bad names cannot hammer discovery.
package resources

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// Resolved is a resource the API server serves.
type Resolved struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
}

// Parse checks the syntax of RESOURCE[.VERSION[.GROUP]] and returns its
// possible readings, most specific first: resource.version.group, then
// resource.group (so deployments.apps also works, as with kubectl).
func Parse(spec string) (*schema.GroupVersionResource, schema.GroupResource, error) {
	if spec == "" {
		return nil, schema.GroupResource{}, fmt.Errorf("empty resource name")
	}
	for _, part := range strings.Split(spec, ".") {
		if part == "" {
			return nil, schema.GroupResource{}, fmt.Errorf("resource %q: empty part between dots", spec)
		}
	}
	if strings.ContainsAny(spec, "/: \t\n") {
		return nil, schema.GroupResource{}, fmt.Errorf("resource %q: want RESOURCE[.VERSION[.GROUP]]", spec)
	}
	gvr, gr := schema.ParseResourceArg(spec)
	return gvr, gr, nil
}

// Resolver resolves resource names against discovery. It is safe for
// concurrent use.
type Resolver struct {
	mapper      *restmapper.DeferredDiscoveryRESTMapper
	expander    meta.RESTMapper
	minInterval time.Duration
	now         func() time.Time

	mu        sync.Mutex
	lastReset time.Time
}

// NewResolver returns a Resolver over the given discovery client. A name
// that is not found refreshes discovery at most every minInterval.
func NewResolver(client discovery.DiscoveryInterface, minInterval time.Duration) *Resolver {
	cached := memory.NewMemCacheClient(client)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	return &Resolver{
		mapper:      mapper,
		expander:    restmapper.NewShortcutExpander(mapper, cached, nil),
		minInterval: minInterval,
		now:         time.Now,
	}
}

// Resolve returns the resource spec names. When it is not found it
// refreshes discovery (rate-limited) and tries once more; the error then
// says the resource is unknown, and a later call may succeed.
func (r *Resolver) Resolve(spec string) (Resolved, error) {
	gvr, gr, err := Parse(spec)
	if err != nil {
		return Resolved{}, err
	}
	res, err := r.resolve(gvr, gr)
	if err == nil || !isNotFound(err) || !r.mayReset() {
		return res, wrap(spec, err)
	}
	r.mapper.Reset()
	res, err = r.resolve(gvr, gr)
	return res, wrap(spec, err)
}

func wrap(spec string, err error) error {
	if err == nil {
		return nil
	}
	if isNotFound(err) {
		return fmt.Errorf("resource %q is not served by the API server (not a known plural, singular, kind or short name)", spec)
	}
	return fmt.Errorf("resource %q: %w", spec, err)
}

// isNotFound covers both "no such resource" and discovery not having
// found any group yet.
func isNotFound(err error) bool {
	return meta.IsNoMatchError(err)
}

// mayReset reports whether discovery may be refreshed now, and if so
// records that it is.
func (r *Resolver) mayReset() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.lastReset.IsZero() && now.Sub(r.lastReset) < r.minInterval {
		return false
	}
	r.lastReset = now
	return true
}

func (r *Resolver) resolve(gvr *schema.GroupVersionResource, gr schema.GroupResource) (Resolved, error) {
	var found schema.GroupVersionResource
	var err error
	if gvr != nil {
		found, err = r.expander.ResourceFor(*gvr)
	}
	if gvr == nil || err != nil {
		found, err = r.expander.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		return Resolved{}, err
	}
	gvk, err := r.expander.KindFor(found)
	if err != nil {
		return Resolved{}, err
	}
	mapping, err := r.expander.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{
		GVR:        mapping.Resource,
		GVK:        mapping.GroupVersionKind,
		Namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace,
	}, nil
}
