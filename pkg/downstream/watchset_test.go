package downstream

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// onChanges records OnChange calls as "key" or "key nil".
type onChanges struct {
	mu    sync.Mutex
	calls []string
}

func (r *onChanges) record(key string, obj runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if obj == nil {
		key += " nil"
	}
	r.calls = append(r.calls, key)
}

func (r *onChanges) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func copyFor(ns, name, cluster string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{"courier.dev/managed-by": "courier", "for": cluster}}}
}

// Clusters whose kubeconfigs reach one kube-apiserver as one user share one
// set of informers, selecting every Cluster's copies; each Client still
// reads, and hears of, only its own. A Cluster on another connection gets
// a set of its own (the positive control).
func TestClustersOnOneConnectionShareWatches(t *testing.T) {
	fk := &fakes{}
	src := newSource(kcSecret("ns", "kc", "1", "https://shared"), kcSecret("ns", "kc-other", "1", "https://other"))
	changes := &onChanges{}
	c := NewCache(src, Options{WatchSelector: managed, ShareLabel: "for", NewClientset: fk.newClientset, OnChange: changes.record})
	t.Cleanup(c.Stop)
	fk.mu.Lock()
	fk.sets = map[string]*fake.Clientset{"https://shared": fake.NewClientset(), "https://other": fake.NewClientset()}
	fc := fk.sets["https://shared"]
	fk.mu.Unlock()
	sels := recordSelectors(fc)

	ctx := context.Background()
	get := func(name, secret string) *Client {
		t.Helper()
		cl, err := c.Get(ctx, cluster("ns", name, secret, ""))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	c1, c2, c3 := get("c1", "kc"), get("c2", "kc"), get("c3", "kc-other")
	if c1.set != c2.set {
		t.Fatal("two Clusters on one connection have a watch set each")
	}
	if c3.set == c1.set {
		t.Fatal("a Cluster on another kube-apiserver shares the first one's watches")
	}
	if want := managed(cluster("ns", "c1", "kc", "")).String(); c1.Selector != want {
		t.Errorf("c1's own selector %q, want %q", c1.Selector, want)
	}
	waitFor(t, "the shared informers to sync", func() bool { return c1.HasSynced() && c2.HasSynced() })
	sels.mu.Lock()
	for sel := range sels.seen {
		if sel != "courier.dev/managed-by=courier,for" {
			t.Errorf("the shared informers selected %q, want every Cluster's copies", sel)
		}
	}
	sels.mu.Unlock()

	for _, s := range []*corev1.Secret{copyFor("app", "a", "c1"), copyFor("app", "b", "c2"), copyFor("app", "c", "c2")} {
		if _, err := c1.Kube.CoreV1().Secrets("app").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the copies in the shared informer", func() bool {
		l, _ := c2.Secrets.List(labels.Everything())
		return len(l) == 2
	})
	if l, _ := c1.Secrets.Secrets("app").List(labels.Everything()); len(l) != 1 || l[0].Name != "a" {
		t.Errorf("c1 lists %v, want its own copy a", l)
	}
	if _, err := c1.Secrets.Secrets("app").Get("b"); !apierrors.IsNotFound(err) {
		t.Errorf("c1 reads c2's copy b: %v, want NotFound", err)
	}
	if s, err := c2.Secrets.Secrets("app").Get("b"); err != nil || s.Name != "b" {
		t.Errorf("c2 reads its copy b: %v, %v", s, err)
	}
	if err := c1.Kube.CoreV1().Secrets("app").Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OnChange for the deleted copy", func() bool { return slices.Contains(changes.get(), "ns/c2 nil") })
	got := changes.get()
	slices.Sort(got)
	if want := []string{"ns/c1", "ns/c2", "ns/c2", "ns/c2 nil"}; !slices.Equal(got, want) {
		t.Errorf("OnChange calls %q, want %q: each copy's change reaches only its Cluster", got, want)
	}
	if fk.calls() != 5 { // Kube of c1, c2, c3; the shared set's informers; c3's
		t.Errorf("built %d clientsets, want 5: the second Cluster on a connection builds no informers", fk.calls())
	}
}

// The shared informers run while any Client reads through them: a
// Cluster rebuilt on the same connection, or forgotten, leaves them to the
// others; the last one to leave stops them.
func TestSharedWatchesStopWithTheirLastCluster(t *testing.T) {
	fk := &fakes{}
	src := newSource(kcSecret("ns", "kc", "1", "https://shared"))
	changes := &onChanges{}
	c := NewCache(src, Options{WatchSelector: managed, ShareLabel: "for", NewClientset: fk.newClientset, OnChange: changes.record})
	t.Cleanup(c.Stop)
	ctx := context.Background()
	c1, err1 := c.Get(ctx, cluster("ns", "c1", "kc", ""))
	c2, err2 := c.Get(ctx, cluster("ns", "c2", "kc", ""))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	set := c1.set

	// The kubeconfig Secret changes but reaches the same connection: both
	// Clients are rebuilt into the same set, each joining before its old
	// one leaves.
	src.put(kcSecret("ns", "kc", "2", "https://shared"))
	r1, err1 := c.Get(ctx, cluster("ns", "c1", "kc", ""))
	r2, err2 := c.Get(ctx, cluster("ns", "c2", "kc", ""))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if r1 == c1 || r1.set != set || r2.set != set {
		t.Fatal("a rebuilt Client on the same connection left the shared set")
	}
	waitDone(t, c1)
	waitDone(t, c2)
	if stopped := func() bool {
		select {
		case <-set.stop:
			return true
		default:
			return false
		}
	}(); stopped {
		t.Fatal("the old Clients' leaving stopped the set the new ones read through")
	}
	if _, err := r1.Kube.CoreV1().Secrets("app").Create(ctx, copyFor("app", "a", "c1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rebuilt c1 to hear of its copy", func() bool { return slices.Contains(changes.get(), "ns/c1") })

	c.Forget("ns/c1")
	waitDone(t, r1)
	if _, err := r2.Kube.CoreV1().Secrets("app").Create(ctx, copyFor("app", "b", "c2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c2 to hear of its copy after c1 was forgotten", func() bool { return slices.Contains(changes.get(), "ns/c2") })

	c.Forget("ns/c2")
	waitDone(t, r2)
	select {
	case <-set.done:
	default:
		t.Fatal("the last Cluster left and the shared informers still run")
	}
	c.sets.mu.Lock()
	defer c.sets.mu.Unlock()
	if len(c.sets.sets) != 0 {
		t.Errorf("%d sets still registered", len(c.sets.sets))
	}
}

func TestShareable(t *testing.T) {
	must := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	tests := []struct {
		own, shared, value string
		ok                 bool
	}{
		{own: "managed=yes,hash=abc", shared: "hash,managed=yes", value: "abc", ok: true},
		{own: "hash in (abc)", shared: "hash", value: "abc", ok: true},
		{own: "managed=yes", ok: false},               // no value of the label
		{own: "hash in (a,b),managed=yes", ok: false}, // more than one
		{own: "hash!=abc", ok: false},
	}
	for _, tc := range tests {
		shared, value, ok := shareable(must(tc.own), "hash")
		if ok != tc.ok || value != tc.value || (ok && shared.String() != tc.shared) {
			t.Errorf("shareable(%q) = %v, %q, %t; want %q, %q, %t", tc.own, shared, value, ok, tc.shared, tc.value, tc.ok)
		}
	}
}

func TestConnectionKey(t *testing.T) {
	base := func() *rest.Config {
		return &rest.Config{Host: "https://d:6443", BearerToken: "t1", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	}
	with := func(f func(*rest.Config)) *rest.Config { c := base(); f(c); return c }
	if connectionKey(base()) == "" || connectionKey(base()) != connectionKey(base()) {
		t.Fatal("two equal configs have no key or different keys")
	}
	differ := map[string]*rest.Config{
		"host":        with(func(c *rest.Config) { c.Host = "https://e:6443" }),
		"token":       with(func(c *rest.Config) { c.BearerToken = "t2" }),
		"CA":          with(func(c *rest.Config) { c.CAData = []byte("other") }),
		"client cert": with(func(c *rest.Config) { c.CertData, c.KeyData = []byte("cert"), []byte("key") }),
		"impersonate": with(func(c *rest.Config) { c.Impersonate.UserName = "someone" }),
	}
	for what, cfg := range differ {
		if connectionKey(cfg) == connectionKey(base()) {
			t.Errorf("a different %s gives the same key", what)
		}
	}
	never := map[string]*rest.Config{
		"proxy":      with(func(c *rest.Config) { c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil } }),
		"token file": with(func(c *rest.Config) { c.BearerTokenFile = "/t" }),
		"wrapper":    with(func(c *rest.Config) { c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rt } }),
	}
	for what, cfg := range never {
		if k := connectionKey(cfg); k != "" {
			t.Errorf("a config with a %s can be shared", what)
		}
	}
}

// Copies written before the share label existed are watched once per set
// (Options.LegacySelector) and listed from that watch for every Cluster of
// it; without the option there is no such watch and callers list live.
func TestUnlabelledCopiesWatchedPerSet(t *testing.T) {
	legacy, err := labels.Parse("courier.dev/managed-by=courier,!for")
	if err != nil {
		t.Fatal(err)
	}
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "old", Labels: map[string]string{"courier.dev/managed-by": "courier"}}}
	for _, tc := range []struct {
		name   string
		legacy labels.Selector
		want   bool
	}{{"with LegacySelector", legacy, true}, {"without", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fakes{objects: []runtime.Object{old, copyFor("app", "a", "c1")}}
			src := newSource(kcSecret("ns", "kc", "1", "https://shared"))
			c := NewCache(src, Options{WatchSelector: managed, ShareLabel: "for", LegacySelector: tc.legacy, NewClientset: fk.newClientset})
			t.Cleanup(c.Stop)
			c1, err1 := c.Get(context.Background(), cluster("ns", "c1", "kc", ""))
			c2, err2 := c.Get(context.Background(), cluster("ns", "c2", "kc", ""))
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			waitFor(t, "the informers to sync", c1.HasSynced)
			for _, cl := range []*Client{c1, c2} {
				got, ok := cl.Unlabelled("Secret")
				if ok != tc.want {
					t.Fatalf("%s: Unlabelled answered %t, want %t", cl.Key, ok, tc.want)
				}
				if ok && (len(got) != 1 || got[0].(*corev1.Secret).Name != "old") {
					t.Errorf("%s: Unlabelled = %v, want the unlabelled copy only", cl.Key, got)
				}
				if cms, ok := cl.Unlabelled("ConfigMap"); ok && len(cms) != 0 {
					t.Errorf("%s: unlabelled ConfigMaps %v, want none", cl.Key, cms)
				}
			}
			if l, _ := c1.Secrets.List(labels.Everything()); len(l) != 1 || l[0].Name != "a" {
				t.Errorf("c1's own copies %v, want a (the unlabelled one is not its own)", l)
			}
		})
	}
}
