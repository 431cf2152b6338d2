// Package downstream keeps one client per downstream cluster, built from the
// kubeconfig Secret its Fleet Cluster names (docs/design.md#inputs), or, for a
// courier-agent, from its own cluster's config (NewClient). A kubeconfig
// that would run a command or read a file in Courier's process is refused,
// and errors quoting one never carry its credentials (kubeconfig.go,
// redact.go). Clusters are independent (docs/design.md#better-than-fleet): building or using one
// cluster's client never waits for another cluster, and an unreachable
// cluster fails fast. Clusters that reach one kube-apiserver as one user
// share its watches (watchSet), each reading only its own copies; a shared
// watch selects only the copies of the Clusters reading through it once
// they are quiet (generation.go), so that a replica holds no copies of
// Clusters another replica delivers to.
package downstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copydigest"
)

// KubeconfigKey is the key of the kubeconfig Secret that holds the kubeconfig.
const KubeconfigKey = "value"

// SecretSource is how the cache reads kubeconfig Secrets upstream. ResourceVersion lets the cache
// avoid re-reading a Secret that has not changed (Courier already runs a metadata-only informer on Secrets).
type SecretSource interface {
	ResourceVersion(namespace, name string) (rv string, exists bool)         // cheap, from a cache
	Get(ctx context.Context, namespace, name string) (*corev1.Secret, error) // a real GET
}

// Options configure a Cache.
type Options struct {
	// Timeout bounds every request made through Client.Kube (rest.Config.Timeout), default 10s,
	// so an unreachable cluster fails fast instead of holding a worker. The informers use the
	// same config without Timeout: a client-side timeout would cut every watch after Timeout.
	Timeout time.Duration
	// WatchSelector picks, for one Cluster, the downstream objects to
	// watch: the copies Courier wrote for that Cluster (its cluster-hash
	// label), so that Clusters sharing a kube-apiserver do not each receive
	// and cache the others' copies. Required.
	WatchSelector func(cluster *fleet.Cluster) labels.Selector
	// OnChange is called with the cluster key ("<namespace>/<name>") when a watched downstream
	// Secret or ConfigMap is added or changed (obj is the object now) or deleted (obj is nil).
	// Must not block.
	OnChange func(clusterKey string, obj runtime.Object)
	// ShareLabel, when set, is the label whose value tells apart the
	// copies of Clusters that reach the same kube-apiserver with the same
	// credentials: such Clusters share one set of informers, which select
	// WatchSelector's objects with any value of it (narrowed to the
	// members' values once they are quiet), and each Client reads
	// and hears of only the objects carrying the value its own
	// WatchSelector requires (see watchSet). A Cluster whose selector does
	// not require one value of it, or whose connection cannot be compared,
	// gets informers of its own.
	ShareLabel string
	// LegacySelector, when set, picks Courier's copies written before
	// ShareLabel existed, which WatchSelector does not: they are watched
	// once per set too, and Client.Unlabelled lists them, so that a new
	// Cluster's first sweep does not list every copy on its kube-apiserver
	// to find them (normally there are none).
	LegacySelector labels.Selector
	// ForeignSelector, when set, picks objects Courier does not own but
	// reports on (Fleet's own copies, docs/design.md#fleets-own-copies). They are watched
	// without their data (a transform drops it before caching), so that a
	// change to one reaches OnChange (obj nil) and the next pass reads it.
	ForeignSelector labels.Selector
	// UserAgent for downstream requests (default "courier").
	UserAgent string
	// NewConfig optionally post-processes the rest.Config built from the kubeconfig (tests, QPS tuning).
	NewConfig func(*rest.Config) (*rest.Config, error)
	// NewClientset builds a clientset from a rest.Config (default NewClientset; tests
	// inject fakes). It is called twice per client: for Kube and for the informers.
	NewClientset func(*rest.Config) (Clientset, error)
}

// QPS and Burst limit the requests Courier sends one downstream cluster,
// all of its clients together: kube-controller-manager's defaults
// (--kube-api-qps 20, --kube-api-burst 30), which a controller writing into
// a cluster it does not own should not exceed. client-go's own default (5,
// burst 10) made a Cluster's first pass -- informer lists, the namespace,
// ten creates -- wait on its bucket for most of its time.
const (
	QPS   = 20
	Burst = 30
)

// Client is the client of one downstream cluster.
type Client struct {
	Key    string    // "<namespace>/<name>" of the Cluster
	Kube   Clientset // for writes and GETs
	Config *rest.Config
	// Secrets and ConfigMaps are this Cluster's copies only
	// (label-filtered informer), all namespaces, each with its data
	// replaced by a digest (digestData): compare them with
	// pkg/copyspec, never read or write their data.
	Secrets    corev1listers.SecretLister
	ConfigMaps corev1listers.ConfigMapLister
	// Selector is the label selector the informers use (Options.WatchSelector).
	Selector string
	// HasSynced reports whether the informers of its copies (and of
	// LegacySelector's) have synced (false while the cluster is
	// unreachable).
	HasSynced func() bool
	// MayHaveForeign reports whether an object Courier does not own but
	// reports on (Options.ForeignSelector: Fleet's own copies) may be at
	// namespace/name: true when the watch of such objects holds one of
	// that kind (Secret or ConfigMap) and name, or has not synced. Nil
	// means it cannot tell.
	MayHaveForeign func(kind, namespace, name string) bool
	// ForeignAt returns the object at namespace/name (of kind Secret or
	// ConfigMap) that the watch of Options.ForeignSelector's objects
	// holds, without its data, and found false when it holds none there;
	// known is false while that watch has not synced, or when there is
	// none. The caller must not change the object.
	ForeignAt func(kind, namespace, name string) (obj metav1.Object, found, known bool)

	// set holds the informers the Client reads through; member is the
	// ShareLabel value it reads in a shared set ("" in a set of its own).
	set    *watchSet
	member string
	stop   chan struct{} // closed when the Client is stopped
	done   chan struct{} // closed once it has left its set (and the set's informers, if it was the last, have returned)
}

// Cache holds one Client per Cluster.
type Cache struct {
	src SecretSource
	o   Options

	mu      sync.Mutex // guards entries and stopped only; never held during I/O
	entries map[string]*entry
	stopped bool
	wg      sync.WaitGroup // informer shutdowns in flight
	sets    watchSets      // the informers, by connection when shared
}

// entry is one cluster's state. All fields but sem are guarded by holding sem.
type entry struct {
	sem     chan struct{} // per-cluster lock; a channel so that waiting honours ctx
	dead    bool          // removed by Forget or Stop
	have    bool          // client/err below are a result
	ref     string        // "<ns>/<name>" of the kubeconfig Secret the result is for
	seenRV  string        // SecretSource's resourceVersion when the result was last confirmed ("" = absent)
	builtRV string        // resourceVersion of the Secret the result was built from ("" = not found)
	client  *Client
	err     error
}

// testHookUnlocked, if set, runs in Get between finding a cluster's entry and locking it.
var testHookUnlocked func()

// NewCache returns an empty Cache. It panics if o.WatchSelector is nil: watching every
// downstream Secret would cache other people's credentials.
func NewCache(src SecretSource, o Options) *Cache {
	if o.WatchSelector == nil {
		panic("downstream.NewCache: Options.WatchSelector is required")
	}
	registerMetrics()
	return &Cache{src: src, o: withDefaults(o), entries: map[string]*entry{}, sets: watchSets{label: o.ShareLabel}}
}

// withDefaults fills in the Options left empty.
func withDefaults(o Options) Options {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.UserAgent == "" {
		o.UserAgent = "courier"
	}
	if o.OnChange == nil {
		o.OnChange = func(string, runtime.Object) {}
	}
	if o.NewClientset == nil {
		o.NewClientset = NewClientset
	}
	return o
}

// Get returns the cluster's client, building it on first use and rebuilding it when the
// kubeconfig Secret's resourceVersion changed (the old client's informers are stopped).
// A KubeconfigError is remembered until the Secret changes. Other errors (reading the Secret
// upstream failed) are returned as they are, not remembered, and leave the current client alone.
// Calls for one cluster are serialised; calls for different clusters never wait for each other.
func (c *Cache) Get(ctx context.Context, cluster *fleet.Cluster) (*Client, error) {
	key := cluster.Namespace + "/" + cluster.Name
	for {
		c.mu.Lock()
		if c.stopped {
			c.mu.Unlock()
			return nil, errors.New("downstream client cache is stopped")
		}
		e := c.entries[key]
		if e == nil {
			e = &entry{sem: make(chan struct{}, 1)}
			c.entries[key] = e
		}
		c.mu.Unlock()
		if testHookUnlocked != nil {
			testHookUnlocked()
		}

		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.dead { // forgotten while we waited: start over with a fresh entry
			<-e.sem
			continue
		}
		cl, err := c.get(ctx, e, key, cluster)
		<-e.sem
		return cl, err
	}
}

func (c *Cache) get(ctx context.Context, e *entry, key string, cluster *fleet.Cluster) (*Client, error) {
	ns, name := cluster.KubeconfigSecretRef()
	if name == "" {
		c.set(e, "", "", "", nil, kerr(key, "cluster %s has no spec.kubeConfigSecret", cluster.Name))
		return nil, e.err
	}
	ref := ns + "/" + name
	if !KubeconfigNamespaceAllowed(ns, cluster.Namespace) {
		// Never read: whoever may edit a Cluster must not be able to point
		// Courier at another tenant's credentials.
		c.set(e, ref, "", "", nil, kerr(key, "kubeconfig Secret %s of cluster %s is not read: spec.kubeConfigSecretNamespace %q is not allowed; "+
			"Courier reads kubeconfig Secrets only from the Cluster's own namespace (%s), %s, or a namespace starting with %q, as Fleet does since v0.16",
			ref, cluster.Name, ns, cluster.Namespace, strings.Join(kubeconfigNamespaces, ", "), kubeconfigNamespacePrefix))
		return nil, e.err
	}
	rv, _ := c.src.ResourceVersion(ns, name) // "" when absent
	if e.have && e.ref == ref && e.seenRV == rv {
		return e.client, e.err
	}
	secret, err := c.src.Get(ctx, ns, name)
	switch {
	case apierrors.IsNotFound(err):
		c.set(e, ref, rv, "", nil, kerr(key, "kubeconfig Secret %s of cluster %s does not exist", ref, cluster.Name))
		return nil, e.err
	case err != nil:
		return nil, fmt.Errorf("reading kubeconfig Secret %s of cluster %s: %w", ref, cluster.Name, err)
	}
	if e.have && e.ref == ref && e.builtRV == secret.ResourceVersion { // the source lagged; nothing changed
		e.seenRV = rv
		return e.client, e.err
	}
	cl, err := c.build(cluster, ref, secret)
	c.set(e, ref, rv, secret.ResourceVersion, cl, err)
	return cl, err
}

// set records a result, stopping the client it replaces.
func (c *Cache) set(e *entry, ref, seenRV, builtRV string, cl *Client, err error) {
	if e.client != nil && e.client != cl {
		c.stopClient(e.client)
	}
	if cl != nil && cl != e.client {
		clientsOpen.Inc()
	}
	e.have, e.ref, e.seenRV, e.builtRV, e.client, e.err = true, ref, seenRV, builtRV, cl, err
}

// setLimits sets what bounds every request to one cluster: o's Timeout
// and UserAgent, and one token bucket at QPS and Burst for every request
// Courier sends the cluster. rest.CopyConfig keeps the bucket, so the
// informers' clientset and each impersonating client built from Config
// draw on it too. Without it each clientset (and each of its API groups)
// gets a bucket of its own, which both lets Courier exceed QPS per cluster
// and costs memory per group at 1,000 Clusters.
func setLimits(cfg *rest.Config, o Options) {
	cfg.Timeout = o.Timeout
	cfg.UserAgent = o.UserAgent
	cfg.QPS, cfg.Burst = QPS, Burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(QPS, Burst)
}

// NewClient builds the client of one downstream cluster from a rest.Config
// rather than a kubeconfig Secret -- a courier-agent's own cluster (docs/design.md#pull-delivery)
// -- with the informers a Cache gives each Cluster: o.WatchSelector's
// copies, and o.ForeignSelector's objects without their data. It sets
// cfg's Timeout, UserAgent and request limit as for a Cache's clients (on
// a copy). Stop stops it.
func NewClient(cluster *fleet.Cluster, cfg *rest.Config, o Options) (*Client, error) {
	if o.WatchSelector == nil {
		return nil, errors.New("downstream.NewClient: Options.WatchSelector is required")
	}
	o = withDefaults(o)
	cfg = rest.CopyConfig(cfg)
	setLimits(cfg, o)
	var err error
	if o.NewConfig != nil {
		if cfg, err = o.NewConfig(cfg); err != nil {
			return nil, err
		}
	}
	return newClient(cluster, cfg, o, func(err error) error { return err }, nil)
}

// Unlabelled returns the objects of kind ("Secret" or "ConfigMap") that
// Options.LegacySelector picks on the Client's kube-apiserver, from its
// watch, or false when there is no such watch or it has not synced: the
// caller then lists them live.
func (c *Client) Unlabelled(kind string) ([]runtime.Object, bool) {
	w := c.set
	if w == nil || w.legacySecrets == nil || !w.fixed.synced() {
		return nil, false
	}
	idx := w.legacyConfigMaps
	if kind == "Secret" {
		idx = w.legacySecrets
	}
	var out []runtime.Object
	for _, o := range idx.List() {
		if obj, ok := o.(runtime.Object); ok {
			out = append(out, obj)
		}
	}
	return out, true
}

// Stop stops the client's informers and waits for them to shut down. Only
// for clients from NewClient: a Cache stops its own.
func (c *Client) Stop() {
	close(c.stop)
	(*watchSets)(nil).leave(c)()
}

// newClient builds the clients of a Cluster from its final cfg and has it
// read through a watch set: a shared one of sets when it may (nil: a set
// of its own). invalid wraps an error building a clientset (a Cache turns
// it into a KubeconfigError that quotes no credential).
func newClient(cluster *fleet.Cluster, cfg *rest.Config, o Options, invalid func(error) error, sets *watchSets) (*Client, error) {
	key := cluster.Namespace + "/" + cluster.Name
	kube, err := o.NewClientset(cfg)
	if err != nil {
		return nil, invalid(err)
	}
	own := o.WatchSelector(cluster)
	w, value, err := sets.join(key, own, cfg, o)
	if err != nil {
		return nil, invalid(err)
	}
	cl := &Client{Key: key, Kube: kube, Config: cfg, Selector: own.String(), set: w, member: value,
		stop: make(chan struct{}), done: make(chan struct{})}
	cl.Secrets = secretLister{memberView[*corev1.Secret]{w.secretsNow, "secret", w.label, value}}
	cl.ConfigMaps = configMapLister{memberView[*corev1.ConfigMap]{w.configMapsNow, "configmap", w.label, value}}
	// HasSynced is about Courier's own copies: the foreign watch has its
	// own answer in MayHaveForeign.
	cl.HasSynced = func() bool { return w.syncedFor(value) }
	cl.MayHaveForeign, cl.ForeignAt = foreignAccess(w, o)
	return cl, nil
}

// dropData empties a Secret's or ConfigMap's data (and its managed
// fields, dropManagedFields) before it is cached.
func dropData(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	}
	return dropManagedFields(obj)
}

// digestData replaces a copy's data with its digest (pkg/copydigest), and
// drops its managed fields (dropManagedFields), before it is cached: a pass
// compares a cached copy with its source only to tell whether it is
// current, for which the digest does, and the data would make Courier's
// memory grow with the size of what it copies times the Clusters it
// copies to. Writes are always built from the source, never from a cached
// copy.
func digestData(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		copydigest.ReplaceSecretData(o)
	case *corev1.ConfigMap:
		copydigest.ReplaceConfigMapData(o)
	}
	return dropManagedFields(obj)
}

// dropManagedFields empties an object's managed fields before it is
// cached: nothing Courier decides reads them, and in a heap profile of a
// replica holding 333 Clusters' copies they were a quarter of what the
// decoded copies held.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// changeHandler calls changed on every add, delete and update but the
// updates of a relist, with the object as it is now (nil when deleted).
func changeHandler(changed func(runtime.Object)) toolscache.ResourceEventHandler {
	return routedHandler(func(any) string { return "" }, func(_ string, now runtime.Object) { changed(now) })
}

// routedHandler is changeHandler that also says, with route, whom each
// event's object is for (read from the object, or the deleted one).
func routedHandler(route func(obj any) string, changed func(to string, now runtime.Object)) toolscache.ResourceEventHandler {
	current := func(obj any) runtime.Object {
		o, _ := obj.(runtime.Object)
		return o
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { changed(route(obj), current(obj)) },
		UpdateFunc: func(old, cur any) {
			if o, err1 := meta.Accessor(old); err1 == nil {
				if n, err2 := meta.Accessor(cur); err2 == nil && o.GetResourceVersion() == n.GetResourceVersion() {
					return // a relist, not a change
				}
			}
			changed(route(cur), current(cur))
		},
		DeleteFunc: func(obj any) { changed(route(obj), nil) },
	}
}

// stopClient stops a client, and its informers when no other Client reads
// through them, without waiting for them; Stop waits.
func (c *Cache) stopClient(cl *Client) {
	clientsOpen.Dec()
	close(cl.stop)
	c.wg.Go(c.sets.leave(cl))
}

// Forget stops and drops a cluster's client (the Cluster was deleted). It waits for a Get
// of the same cluster that is in flight.
func (c *Cache) Forget(clusterKey string) {
	c.mu.Lock()
	e := c.entries[clusterKey]
	delete(c.entries, clusterKey)
	c.mu.Unlock()
	if e != nil {
		c.kill(e)
	}
}

// Stop stops every client and waits for their informers to shut down. Get fails afterwards.
func (c *Cache) Stop() {
	c.mu.Lock()
	c.stopped = true
	entries := c.entries
	c.entries = map[string]*entry{}
	c.mu.Unlock()
	for _, e := range entries {
		c.kill(e)
	}
	c.wg.Wait()
}

func (c *Cache) kill(e *entry) {
	e.sem <- struct{}{}
	e.dead = true
	if e.client != nil {
		c.stopClient(e.client)
		e.client = nil
	}
	<-e.sem
}
