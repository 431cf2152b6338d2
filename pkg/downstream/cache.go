// Package downstream keeps one client per downstream cluster, built from the
// kubeconfig Secret its Fleet Cluster names (DESIGN.md §2). Clusters are
// independent (§3.10): building or using one cluster's client never waits for
// another cluster, and an unreachable cluster fails fast. Clusters that reach
// one kube-apiserver as one user share its watches (watchSet), each reading
// only its own copies.
package downstream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/flowcontrol"

	"sigs.k8s.io/yaml"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
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
	// WatchSelector's objects with any value of it, and each Client reads
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
	// reports on (Fleet's own copies, DESIGN §3 rule 12). They are watched
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

// KubeconfigError says why a cluster has no client. Msg is meant for a status row and never
// contains the kubeconfig's content.
type KubeconfigError struct {
	Cluster string // "<namespace>/<name>" of the Cluster
	Msg     string
}

func (e *KubeconfigError) Error() string { return e.Msg }

// Client is the client of one downstream cluster.
type Client struct {
	Key        string    // "<namespace>/<name>" of the Cluster
	Kube       Clientset // for writes and GETs
	Config     *rest.Config
	Secrets    corev1listers.SecretLister // this Cluster's copies only (label-filtered informer), all namespaces
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
	e.have, e.ref, e.seenRV, e.builtRV, e.client, e.err = true, ref, seenRV, builtRV, cl, err
}

func (c *Cache) build(cluster *fleet.Cluster, ref string, s *corev1.Secret) (*Client, error) {
	key := cluster.Namespace + "/" + cluster.Name
	data, ok := s.Data[KubeconfigKey]
	if !ok {
		return nil, kerr(key, "kubeconfig Secret %s has no key %q", ref, KubeconfigKey)
	}
	invalid := func(err error) error {
		return kerr(key, "kubeconfig in Secret %s is invalid: %s", ref, redact(err.Error(), data))
	}
	// Check before building: building already reads the files a kubeconfig
	// names.
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, invalid(err)
	}
	if field := unsafeField(raw); field != "" {
		return nil, kerr(key, "kubeconfig in Secret %s is refused: it uses %s, which would make Courier run a command or read a file of its own; embed the credentials instead", ref, field)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, invalid(err)
	}
	setLimits(cfg, c.o)
	if c.o.NewConfig != nil {
		if cfg, err = c.o.NewConfig(cfg); err != nil {
			return nil, invalid(err)
		}
	}
	return newClient(cluster, cfg, c.o, invalid, &c.sets)
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
// rather than a kubeconfig Secret -- a courier-agent's own cluster (DESIGN
// §9) -- with the informers a Cache gives each Cluster: o.WatchSelector's
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
	if w == nil || w.legacySecrets == nil || !w.own.synced() {
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
	cl.Secrets = secretLister{memberView[*corev1.Secret]{w.secrets, "secret", w.label, value}}
	cl.ConfigMaps = configMapLister{memberView[*corev1.ConfigMap]{w.configMaps, "configmap", w.label, value}}
	// HasSynced is about Courier's own copies: the foreign watch has its
	// own answer in MayHaveForeign.
	cl.HasSynced = w.own.synced
	cl.MayHaveForeign = func(string, string, string) bool { return false }
	if o.ForeignSelector != nil {
		fs, fc := w.foreignSecrets, w.foreignConfigMaps
		cl.MayHaveForeign = func(kind, namespace, name string) bool {
			if !w.foreign.synced() {
				return true
			}
			var err error
			if kind == "Secret" {
				_, err = fs.Secrets(namespace).Get(name)
			} else {
				_, err = fc.ConfigMaps(namespace).Get(name)
			}
			return !apierrors.IsNotFound(err)
		}
	}
	return cl, nil
}

// dropData empties a Secret's or ConfigMap's data before it is cached.
func dropData(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
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

// The namespaces, besides the Cluster's own, that a kubeconfig Secret may be
// read from (DESIGN §2; Fleet v0.16, rancher/fleet#5224).
var kubeconfigNamespaces = []string{"fleet-local", "fleet-default", "cattle-fleet-system", "cattle-fleet-clusters-system"}

const kubeconfigNamespacePrefix = "cluster-"

// KubeconfigNamespaceAllowed reports whether a Cluster in clusterNamespace
// may name a kubeconfig Secret in namespace.
func KubeconfigNamespaceAllowed(namespace, clusterNamespace string) bool {
	if namespace == clusterNamespace || strings.HasPrefix(namespace, kubeconfigNamespacePrefix) {
		return true
	}
	for _, n := range kubeconfigNamespaces {
		if namespace == n {
			return true
		}
	}
	return false
}

func kerr(cluster, format string, args ...any) error {
	return &KubeconfigError{Cluster: cluster, Msg: fmt.Sprintf(format, args...)}
}

// redact replaces in msg every word of the kubeconfig data that is not a key, so that an
// error quoting a token, a password or a server URL does not carry it into a status row.
// Words are split at whitespace and YAML/JSON punctuation; words shorter than 3 are kept.
// The words are those of the data as written and, since a message quotes what the parser
// made of them, the names of its YAML anchors and aliases ("*tok-..." is quoted
// "tok-...") and, when it parses, the words of its string values as decoded ("tok\x2d..."
// is quoted "tok-...").
//
// The words of the parsers' own messages (parserVocabulary) are kept, or they would be
// hidden whenever the data happens to hold them too: "{{{ this: is [not yaml" made
// "yaml: did not find expected ',' or '}'" read "<redacted>: did <redacted> find expected
// ',' or '}'". Keeping them is no leak. A word of the data is only ever shown when it is
// one of a fixed list of common English words and parser terms, published here; a token,
// a password, a certificate or a server URL that is nothing but such a word ("expected",
// "mapping") is no credible secret, and a reader cannot tell it from the parser's own use
// of the word. Any other word is redacted, also one that merely contains a vocabulary word
// ("notyaml-s3cr3t"), and the replacement is by substring, so a secret is hidden wherever
// the message quotes it.
func redact(msg string, data []byte) string {
	seen := map[string]bool{}
	var words []string
	add := func(w string) {
		if len(w) >= 3 && !seen[w] && !parserVocabulary[w] && strings.Contains(msg, w) {
			seen[w] = true
			words = append(words, w)
		}
	}
	eachWord(string(data), true, func(w string) {
		add(w)
		if w[0] == '&' || w[0] == '*' {
			add(anchorName(w[1:]))
		}
	})
	var v any
	if yaml.Unmarshal(data, &v) == nil {
		eachString(v, func(s string) { eachWord(s, false, add) })
	}
	sort.Slice(words, func(a, b int) bool { return len(words[a]) > len(words[b]) })
	pairs := make([]string, 0, 2*len(words))
	for _, w := range words {
		pairs = append(pairs, w, "<redacted>")
	}
	return strings.NewReplacer(pairs...).Replace(msg)
}

// eachWord calls f with each word of s, split at whitespace and YAML/JSON punctuation;
// with skipKeys, not with a word followed by ':' and a blank (or the end), a mapping key.
func eachWord(s string, skipKeys bool, f func(string)) {
	isSep := func(b byte) bool { return strings.IndexByte(" \t\r\n:,[]{}\"'", b) >= 0 }
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && !isSep(s[j]) {
			j++
		}
		if j == i {
			i++
			continue
		}
		w, k := s[i:j], j
		if k < len(s) && (s[k] == '"' || s[k] == '\'') {
			k++
		}
		isKey := k < len(s) && s[k] == ':' && (k > j || k+1 == len(s) || strings.IndexByte(" \t\r\n", s[k+1]) >= 0)
		if !skipKeys || !isKey {
			f(w)
		}
		i = j
	}
}

// anchorName is the name the YAML parser reads after '&' or '*': letters, digits, '_' and
// '-' (go.yaml.in/yaml/v2's is_alpha).
func anchorName(s string) string {
	n := 0
	for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z' || s[n] == '_' || s[n] == '-') {
		n++
	}
	return s[:n]
}

// eachString calls f with each string value in v, decoded YAML or JSON; map keys are
// left out, as eachWord leaves out keys.
func eachString(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			eachString(e, f)
		}
	case map[string]any:
		for _, e := range v {
			eachString(e, f)
		}
	}
}

// parserVocabulary are the words (of 3 characters or more, as redact splits them) of the
// messages that reading a kubeconfig can fail with: go.yaml.in/yaml/v2's scanner, parser
// and decoder (through sigs.k8s.io/yaml), encoding/json's syntax and type errors,
// apimachinery's decoder and clientcmd's validation. They say what is wrong, never what
// the data holds, and redact never hides them. Only whole words count: the list is not a
// pattern, and a word of the data that is not exactly one of these is redacted.
var parserVocabulary = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		yaml YAML %YAML %TAG TAG json JSON line column
		did not could find found expected unexpected the that this cannot start any token
		mapping mappings values value keys key are allowed context block sequence entries
		entry collection node content document stream end indicator directive name names tag
		handle URI escape escaped octet version number whitespace break comment alphabetic
		numeric digit hexdecimal character characters while parsing scanning scalar plain
		quoted single-quoted double-quoted literal folded flow simple complex alias anchor
		tab violates indentation where space leading trailing incorrect invalid Unicode code
		duplicate extremely long incompatible undefined unknown non-alphabetical control
		surrogate area low incomplete UTF-8 UTF-16 pair length increasing level next for
		referenced contains itself excessive aliasing exceeded max depth !!binary binary
		base64 data input error converting decoding unmarshaling marshaling into unmarshal
		Go struct field type looking beginning object array element string true false null
		expecting after pair couldn get version/kind parse registered scheme kind
		invalid configuration provided try setting KUBERNETES_MASTER environment variable
		was specified cluster has server defined host must URL port
	`) {
		m[w] = true
	}
	return m
}()

// unsafeField names the first part of a kubeconfig that would act inside
// Courier's own process: an exec or auth-provider plugin runs a command
// there, and a file path reads Courier's files (its own ServiceAccount token,
// say) and sends them to whatever server the kubeconfig names. Anyone who
// may write a Cluster's kubeconfig Secret could otherwise take over Courier.
// Every user and cluster entry is checked, not only the current context's.
func unsafeField(cfg *clientcmdapi.Config) string {
	for _, u := range cfg.AuthInfos {
		switch {
		case u.Exec != nil:
			return "an exec credential plugin"
		case u.AuthProvider != nil:
			return "an auth-provider plugin"
		case u.TokenFile != "":
			return "tokenFile"
		case u.ClientCertificate != "" || u.ClientKey != "":
			return "client-certificate or client-key file paths"
		}
	}
	for _, c := range cfg.Clusters {
		if c.CertificateAuthority != "" {
			return "a certificate-authority file path"
		}
	}
	return ""
}
