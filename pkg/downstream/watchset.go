package downstream

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// A watchSet is the informers of one connection -- one kube-apiserver,
// reached as one user -- and the Clients that read through them.
//
// Without Options.ShareLabel every Client has a set of its own, whose
// informers select that Cluster's copies (Options.WatchSelector). With it,
// Clusters whose kubeconfigs reach the same kube-apiserver with the same
// credentials share one set: its informers select what WatchSelector
// selects with any value of the label (so every Cluster's copies there)
// at first, and only the values its members read once its membership is
// quiet (generation.go); each Client's listers and OnChange see only the
// objects whose label has the value its own selector requires. A
// kube-apiserver dispatches
// each event to every watcher of its resource and filters it there, so N
// Clusters on one kube-apiserver with a watch each cost it N filters per
// write, and N initial lists: in `make bench` at 1,000 Clusters on two
// kube-apiservers, 35-50 % of a downstream kube-apiserver's CPU was spent
// dispatching events to Courier's 2,000 watchers (docs/benchmarks.md). A
// real fleet has one Cluster per kube-apiserver and so one watch per
// resource either way; a shared set makes Clusters registered twice, and
// fleets simulated on a few kube-apiservers, cost what that does.
type watchSet struct {
	// key is the connection's identity (connectionKey), "" for a set of
	// one Client that is never shared.
	key string
	// label is Options.ShareLabel for a shared set, "" otherwise.
	label string
	// selector is what the informers of Courier's copies select while the
	// set is wide (base as a string).
	selector string
	base     labels.Selector

	// gen is the informers of Courier's copies now (generation.go); a
	// shared set's rebuilder replaces them.
	gen      atomic.Pointer[generation]
	kube     Clientset
	onChange func(string, runtime.Object)
	indexers toolscache.Indexers
	kick     chan struct{} // membership changed (shared sets)
	rebuilt  chan struct{} // closed when the rebuilder has returned
	settled  atomic.Int64  // settle checks made, for tests

	// fixed are the informers no rebuild replaces: legacySecrets and
	// legacyConfigMaps hold Options.LegacySelector's objects (nil
	// without it).
	fixed            informers
	legacySecrets    toolscache.Indexer
	legacyConfigMaps toolscache.Indexer
	// foreign holds Options.ForeignSelector's objects (none without it).
	foreign           informers
	foreignSecrets    corev1listers.SecretLister
	foreignConfigMaps corev1listers.ConfigMapLister

	stop chan struct{} // closed when the last member leaves
	done chan struct{} // closed once the informers have returned

	mu sync.Mutex
	// members counts, per label value, the Clients of each Cluster key
	// reading through the set (a Cluster's rebuilt Client joins before the
	// old one leaves).
	members map[string]map[string]int
	size    int
}

// watchSets finds the shared watch set of a connection (a Cache's).
type watchSets struct {
	label string // Options.ShareLabel; "" shares nothing
	mu    sync.Mutex
	sets  map[string]*watchSet
}

// join adds a Client of cluster clusterKey, whose own selector is own, to
// a set: the shared one of its connection, built and started when it is
// the first, or (r nil, no ShareLabel, a selector or connection that
// cannot be shared) a new one of its own. It returns the set and the label
// value the Client reads in it.
func (r *watchSets) join(clusterKey string, own labels.Selector, cfg *rest.Config, o Options) (*watchSet, string, error) {
	key, selector, value := "", own, ""
	if r != nil && r.label != "" {
		if shared, v, ok := shareable(own, r.label); ok {
			if k := connectionKey(cfg); k != "" {
				// The selector is part of the key: a set serves only
				// Clusters that would select the same objects.
				key, selector, value = k+"\x00"+shared.String(), shared, v
			}
		}
	}
	if key == "" {
		w, err := newWatchSet("", "", own, cfg, o)
		if err != nil {
			return nil, "", err
		}
		w.join("", clusterKey)
		w.start()
		return w, "", nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.sets[key]
	if w == nil {
		var err error
		if w, err = newWatchSet(key, r.label, selector, cfg, o); err != nil {
			return nil, "", err
		}
		if r.sets == nil {
			r.sets = map[string]*watchSet{}
		}
		r.sets[key] = w
		w.start()
	}
	w.join(value, clusterKey)
	return w, value, nil
}

// leave removes a stopped Client from its set, and stops the set's
// informers when it was the last to read through them. It returns what
// waits for that to finish (their return, when they were stopped), and
// closes cl.done at its end. A set of one needs no r.
func (r *watchSets) leave(cl *Client) (wait func()) {
	w := cl.set
	if w.key != "" {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	last := w.leave(cl.member, cl.Key)
	if last {
		if w.key != "" {
			delete(r.sets, w.key) // under r.mu: nobody joins a stopping set
		}
		close(w.stop)
	}
	return func() {
		if last {
			w.shutdown()
		}
		close(cl.done)
	}
}

// memberIndex indexes a shared set's objects by their ShareLabel value.
const memberIndex = "member"

// newWatchSet builds the informers for cfg (not started). own is the
// selector of Courier's copies the informers use.
func newWatchSet(key, label string, own labels.Selector, cfg *rest.Config, o Options) (*watchSet, error) {
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0 // see Options.Timeout
	// Without gzip: a compressed watch keeps a decompressor with a 32 KiB
	// window open for as long as it lasts. The lists are of Courier's own
	// copies only, and the events are small.
	watchCfg.DisableCompression = true
	if key != "" {
		// A shared set outlives the Client whose config it was built
		// from: a bucket of its own. A set of one keeps its Cluster's,
		// which bounds all Courier sends that cluster.
		watchCfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(QPS, Burst)
	}
	watchKube, err := o.NewClientset(watchCfg)
	if err != nil {
		return nil, err
	}
	w := &watchSet{key: key, label: label, selector: own.String(), base: own, stop: make(chan struct{}), done: make(chan struct{}),
		kube: watchKube, onChange: o.OnChange, kick: make(chan struct{}, 1), rebuilt: make(chan struct{}),
		members: map[string]map[string]int{}}
	if label != "" {
		w.indexers = toolscache.Indexers{memberIndex: func(obj any) ([]string, error) {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, nil
			}
			if v, ok := m.GetLabels()[label]; ok {
				return []string{v}, nil
			}
			return nil, nil
		}}
	}
	first := w.stop // a set of one: its only generation lives as long as it
	if label != "" {
		first = make(chan struct{})
	}
	w.gen.Store(w.newGeneration(nil, first))
	w.gen.Load().live.Store(true)
	if o.LegacySelector != nil {
		legacy := watchOptions{selector: o.LegacySelector.String(), handler: toolscache.ResourceEventHandlerFuncs{}, transform: digestData}
		w.legacySecrets = w.fixed.secrets(watchKube, legacy)
		w.legacyConfigMaps = w.fixed.configMaps(watchKube, legacy)
	}
	if o.ForeignSelector != nil {
		// Objects Courier does not own but reports on (Fleet's copies):
		// held without their data; any change queues every member
		// (OnChange with nil), whose pass reads the object live.
		foreign := watchOptions{selector: o.ForeignSelector.String(), transform: dropData,
			handler: changeHandler(func(runtime.Object) {
				for _, key := range w.allMembers() {
					o.OnChange(key, nil)
				}
			})}
		w.foreignSecrets = corev1listers.NewSecretLister(w.foreign.secrets(watchKube, foreign))
		w.foreignConfigMaps = corev1listers.NewConfigMapLister(w.foreign.configMaps(watchKube, foreign))
	}
	return w, nil
}

// start runs the informers until the last member leaves, and a shared
// set's rebuilder.
func (w *watchSet) start() {
	g := w.gen.Load()
	g.inf.start(g.stop)
	w.fixed.start(w.stop)
	w.foreign.start(w.stop)
	if w.label != "" {
		go w.rebuild()
	} else {
		close(w.rebuilt)
	}
}

// shutdown waits for the informers of a stopped set.
func (w *watchSet) shutdown() {
	<-w.rebuilt
	w.gen.Load().inf.wait()
	w.fixed.wait()
	w.foreign.wait()
	close(w.done)
}

// join adds a Client of cluster key reading the objects labelled value.
func (w *watchSet) join(value, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.members[value] == nil {
		w.members[value] = map[string]int{}
	}
	w.members[value][key]++
	w.size++
	w.changed()
}

// leave removes one Client of cluster key, and reports whether it was the
// set's last.
func (w *watchSet) leave(value, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := w.members[value]; m[key] > 0 {
		if m[key]--; m[key] == 0 {
			delete(m, key)
		}
		if len(m) == 0 {
			delete(w.members, value)
			w.changed()
		}
		w.size--
	}
	return w.size == 0
}

// membersOf returns the Cluster keys of the members reading objects
// labelled value.
func (w *watchSet) membersOf(value string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.members[value]))
	for k := range w.members[value] {
		keys = append(keys, k)
	}
	return keys
}

// allMembers returns the Cluster key of every member.
func (w *watchSet) allMembers() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []string
	for _, m := range w.members {
		for k := range m {
			keys = append(keys, k)
		}
	}
	return keys
}

// ownHandler calls onChange for the members an object of Courier's is
// for: in a shared set those whose label value it carries, in a set of
// one its only member (whose value is ""). Events of a generation not yet
// live are dropped: the one it replaces still passes them on.
func (w *watchSet) ownHandler(g *generation, onChange func(string, runtime.Object)) toolscache.ResourceEventHandler {
	return routedHandler(func(obj any) string {
		if w.label == "" {
			return ""
		}
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return ""
		}
		return m.GetLabels()[w.label]
	}, func(value string, now runtime.Object) {
		if !g.live.Load() {
			return
		}
		for _, key := range w.membersOf(value) {
			onChange(key, now)
		}
	})
}

// shareable splits a Cluster's selector into what a shared set selects --
// the same with the label's requirement made "exists" -- and the value the
// Cluster's own selector requires of the label. ok is false when the
// selector does not require exactly one value of label: such a Cluster
// gets a set of its own.
func shareable(own labels.Selector, label string) (shared labels.Selector, value string, ok bool) {
	reqs, selectable := own.Requirements()
	if !selectable {
		return nil, "", false
	}
	shared = labels.NewSelector()
	for _, r := range reqs {
		if r.Key() == label {
			vals := r.Values()
			if (r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals && r.Operator() != selection.In) || vals.Len() != 1 || ok {
				return nil, "", false
			}
			value, ok = vals.UnsortedList()[0], true
			exists, err := labels.NewRequirement(label, selection.Exists, nil)
			if err != nil {
				return nil, "", false
			}
			r = *exists
		}
		shared = shared.Add(r)
	}
	return shared, value, ok
}

// connectionKey identifies whom cfg talks to and as whom: two configs with
// the same key reach the same kube-apiserver with the same credentials, so
// what one may watch the other may too. It is a sha256 of those fields,
// held only in memory to find a set and never logged or shown. It is ""
// -- never shared -- when cfg holds something that cannot be compared: a
// proxy, a dialer, a transport or a wrapper of one, a credential plugin,
// or a file.
func connectionKey(cfg *rest.Config) string {
	tls := cfg.TLSClientConfig
	if cfg.Proxy != nil || cfg.Dial != nil || cfg.Transport != nil || cfg.WrapTransport != nil ||
		cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" ||
		tls.CertFile != "" || tls.KeyFile != "" || tls.CAFile != "" {
		return ""
	}
	b, err := json.Marshal(struct {
		Host, APIPath, Username, Password, BearerToken, ServerName string
		Impersonate                                                rest.ImpersonationConfig
		Insecure                                                   bool
		CAData, CertData, KeyData                                  []byte
		NextProtos                                                 []string
	}{cfg.Host, cfg.APIPath, cfg.Username, cfg.Password, cfg.BearerToken, tls.ServerName,
		cfg.Impersonate, tls.Insecure, tls.CAData, tls.CertData, tls.KeyData, tls.NextProtos})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}

// memberView reads the objects of one member from a set's informer: all
// of them in a set of one (value ""), those labelled value in a shared
// set.
type memberView[T runtime.Object] struct {
	indexer  func() toolscache.Indexer // the set's generation now
	resource string                    // "secret", "configmap": as in a lister's NotFound
	label    string
	value    string
}

func (v memberView[T]) mine(obj any) (T, bool) {
	t, ok := obj.(T)
	if !ok || v.label == "" {
		return t, ok
	}
	m, err := meta.Accessor(obj)
	return t, err == nil && m.GetLabels()[v.label] == v.value
}

func (v memberView[T]) list(namespace string, sel labels.Selector) ([]T, error) {
	var objs []any
	var err error
	switch {
	case v.label != "":
		objs, err = v.indexer().ByIndex(memberIndex, v.value)
	case namespace != "":
		objs, err = v.indexer().ByIndex(toolscache.NamespaceIndex, namespace)
	default:
		objs = v.indexer().List()
	}
	if err != nil {
		return nil, err
	}
	var out []T
	for _, o := range objs {
		t, ok := v.mine(o)
		if !ok {
			continue
		}
		m, err := meta.Accessor(t)
		if err != nil || (namespace != "" && m.GetNamespace() != namespace) || !sel.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

func (v memberView[T]) get(namespace, name string) (T, error) {
	obj, exists, err := v.indexer().GetByKey(namespace + "/" + name)
	var zero T
	if err != nil {
		return zero, err
	}
	if t, ok := v.mine(obj); exists && ok {
		return t, nil
	}
	return zero, apierrors.NewNotFound(corev1.Resource(v.resource), name)
}

// secretLister and configMapLister are client-go's listers over a
// memberView.
type secretLister struct{ v memberView[*corev1.Secret] }
type secretNamespaceLister struct {
	v  memberView[*corev1.Secret]
	ns string
}

var _ corev1listers.SecretLister = secretLister{}

func (l secretLister) List(sel labels.Selector) ([]*corev1.Secret, error) { return l.v.list("", sel) }
func (l secretLister) Secrets(ns string) corev1listers.SecretNamespaceLister {
	return secretNamespaceLister{l.v, ns}
}
func (l secretNamespaceLister) List(sel labels.Selector) ([]*corev1.Secret, error) {
	return l.v.list(l.ns, sel)
}
func (l secretNamespaceLister) Get(name string) (*corev1.Secret, error) { return l.v.get(l.ns, name) }

type configMapLister struct{ v memberView[*corev1.ConfigMap] }
type configMapNamespaceLister struct {
	v  memberView[*corev1.ConfigMap]
	ns string
}

var _ corev1listers.ConfigMapLister = configMapLister{}

func (l configMapLister) List(sel labels.Selector) ([]*corev1.ConfigMap, error) {
	return l.v.list("", sel)
}
func (l configMapLister) ConfigMaps(ns string) corev1listers.ConfigMapNamespaceLister {
	return configMapNamespaceLister{l.v, ns}
}
func (l configMapNamespaceLister) List(sel labels.Selector) ([]*corev1.ConfigMap, error) {
	return l.v.list(l.ns, sel)
}
func (l configMapNamespaceLister) Get(name string) (*corev1.ConfigMap, error) {
	return l.v.get(l.ns, name)
}
