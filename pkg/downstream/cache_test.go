package downstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

const fakeToken = "tok-3f9a1c7e5b2d4068"

// managed selects by the Cluster's name, the way Courier's own selector
// (copyspec.ClusterSelector) selects by a hash of it.
func managed(c *fleet.Cluster) labels.Selector {
	return labels.SelectorFromSet(labels.Set{"courier.dev/managed-by": "courier", "for": c.Name})
}

// fakeSource is a SecretSource over a map; it counts Gets and can hold them.
type fakeSource struct {
	mu      sync.Mutex
	secrets map[string]*corev1.Secret // "<ns>/<name>"
	lagRV   map[string]string         // overrides what ResourceVersion reports (an informer lagging behind)
	getErr  error
	gets    map[string]int
	hold    chan struct{} // if set, Get waits for it to be closed
	entered chan string   // if set, Get sends its key on entry
}

func newSource(secrets ...*corev1.Secret) *fakeSource {
	f := &fakeSource{secrets: map[string]*corev1.Secret{}, lagRV: map[string]string{}, gets: map[string]int{}}
	for _, s := range secrets {
		f.put(s)
	}
	return f
}

func (f *fakeSource) put(s *corev1.Secret) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.secrets[s.Namespace+"/"+s.Name] = s
}

func (f *fakeSource) ResourceVersion(ns, name string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rv, ok := f.lagRV[ns+"/"+name]; ok {
		return rv, true
	}
	s, ok := f.secrets[ns+"/"+name]
	if !ok {
		return "", false
	}
	return s.ResourceVersion, true
}

func (f *fakeSource) Get(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	key := ns + "/" + name
	f.mu.Lock()
	f.gets[key]++
	hold, entered, getErr := f.hold, f.entered, f.getErr
	f.mu.Unlock()
	if entered != nil {
		entered <- key
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if getErr != nil {
		return nil, getErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.secrets[key]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return s.DeepCopy(), nil
}

func (f *fakeSource) getCount(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets[key]
}

// fakes hands out one fake clientset per server host, so that Kube and the informers of a
// client share it, and records every config it was given.
type fakes struct {
	mu      sync.Mutex
	sets    map[string]*fake.Clientset
	configs []*rest.Config
	objects []runtime.Object
}

func (f *fakes) newClientset(c *rest.Config) (Clientset, error) {
	if _, err := kubernetes.NewForConfig(c); err != nil { // validate as the real constructor would
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configs = append(f.configs, rest.CopyConfig(c))
	if f.sets == nil {
		f.sets = map[string]*fake.Clientset{}
	}
	if f.sets[c.Host] == nil {
		f.sets[c.Host] = fake.NewClientset(f.objects...)
	}
	return f.sets[c.Host], nil
}

func (f *fakes) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.configs)
}

func kubeconfig(server string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
users:
- name: u
  user:
    token: %s
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`, server, fakeToken)
}

func secret(ns, name, rv string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}, Data: data}
}

func kcSecret(ns, name, rv, server string) *corev1.Secret {
	return secret(ns, name, rv, map[string][]byte{"value": kubeconfig(server)})
}

func cluster(ns, name, secretName, secretNS string) *fleet.Cluster {
	return &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fleet.ClusterSpec{KubeConfigSecret: secretName, KubeConfigSecretNamespace: secretNS},
	}
}

func newTestCache(t *testing.T, src SecretSource, fk *fakes, onChange func(string, runtime.Object)) *Cache {
	t.Helper()
	c := NewCache(src, Options{WatchSelector: managed, NewClientset: fk.newClientset, OnChange: onChange})
	t.Cleanup(c.Stop)
	return c
}

func stopped(cl *Client) bool {
	select {
	case <-cl.stop:
		return true
	default:
		return false
	}
}

func waitDone(t *testing.T, cl *Client) {
	t.Helper()
	select {
	case <-cl.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("informers of %s did not shut down", cl.Key)
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGetErrors(t *testing.T) {
	badYAML := []byte("apiVersion: v1\nkind: Config\nusers: [\n  token: " + fakeToken)
	// Valid YAML whose errors quote the kubeconfig: an unknown current-context and a server URL.
	quotingContext := []byte("apiVersion: v1\nkind: Config\ncurrent-context: " + fakeToken + "\n")
	quotingServer := kubeconfig("https://admin:" + fakeToken + "@example:nope")
	tests := []struct {
		name    string
		cluster *fleet.Cluster
		secrets []*corev1.Secret
		want    string // exact message, or prefix when it ends with "*"
	}{
		{"no kubeConfigSecret", cluster("fleet-default", "c1", "", ""), nil,
			"cluster c1 has no spec.kubeConfigSecret"},
		{"secret not found", cluster("fleet-default", "c1", "c1-kubeconfig", ""), nil,
			"kubeconfig Secret fleet-default/c1-kubeconfig of cluster c1 does not exist"},
		{"secret in other namespace not found", cluster("fleet-default", "c1", "c1-kubeconfig", "cluster-kc"),
			[]*corev1.Secret{kcSecret("fleet-default", "c1-kubeconfig", "1", "https://a")},
			"kubeconfig Secret cluster-kc/c1-kubeconfig of cluster c1 does not exist"},
		{"no value key", cluster("fleet-default", "c1", "c1-kubeconfig", ""),
			[]*corev1.Secret{secret("fleet-default", "c1-kubeconfig", "1", map[string][]byte{"kubeconfig": kubeconfig("https://a")})},
			`kubeconfig Secret fleet-default/c1-kubeconfig has no key "value"`},
		{"empty value", cluster("fleet-default", "c1", "c1-kubeconfig", ""),
			[]*corev1.Secret{secret("fleet-default", "c1-kubeconfig", "1", map[string][]byte{"value": nil})},
			"kubeconfig in Secret fleet-default/c1-kubeconfig is invalid: *"},
		{"invalid yaml", cluster("fleet-default", "c1", "c1-kubeconfig", ""),
			[]*corev1.Secret{secret("fleet-default", "c1-kubeconfig", "1", map[string][]byte{"value": badYAML})},
			"kubeconfig in Secret fleet-default/c1-kubeconfig is invalid: *"},
		{"not YAML", cluster("fleet-default", "c1", "c1-kubeconfig", ""),
			[]*corev1.Secret{secret("fleet-default", "c1-kubeconfig", "1", map[string][]byte{"value": []byte("{{{ this: is [not yaml")})},
			"kubeconfig in Secret fleet-default/c1-kubeconfig is invalid: yaml: did not find expected ',' or '}'"},
		{"error quoting current-context", cluster("fleet-default", "c1", "c1-kubeconfig", ""),
			[]*corev1.Secret{secret("fleet-default", "c1-kubeconfig", "1", map[string][]byte{"value": quotingContext})},
			"kubeconfig in Secret fleet-default/c1-kubeconfig is invalid: *context was not found for specified context: <redacted>*"},
		{"error quoting server URL", cluster("fleet-default", "c1", "c1-kubeconfig", ""),
			[]*corev1.Secret{secret("fleet-default", "c1-kubeconfig", "1", map[string][]byte{"value": quotingServer})},
			"kubeconfig in Secret fleet-default/c1-kubeconfig is invalid: host must be a URL or a host:port pair: *"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fakes{}
			c := newTestCache(t, newSource(tc.secrets...), fk, nil)
			cl, err := c.Get(context.Background(), tc.cluster)
			if cl != nil || err == nil {
				t.Fatalf("Get = %v, %v; want an error", cl, err)
			}
			var ke *KubeconfigError
			if !errors.As(err, &ke) {
				t.Fatalf("error %T %q is not a *KubeconfigError", err, err)
			}
			if ke.Cluster != "fleet-default/c1" {
				t.Errorf("KubeconfigError.Cluster = %q, want fleet-default/c1", ke.Cluster)
			}
			if !matches(err.Error(), tc.want) {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), fakeToken) {
				t.Errorf("error %q contains the kubeconfig's token", err)
			}
			if n := fk.calls(); n != 0 {
				t.Errorf("built %d clientsets for a broken cluster", n)
			}
		})
	}
}

// matches compares exactly, or with "*" as a wildcard for any text.
func matches(s, pattern string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return s == pattern
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1:] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return parts[len(parts)-1] == "" || s == ""
}

func TestSecretNamespace(t *testing.T) {
	tests := []struct {
		name     string
		secretNS string
		wantRead string
	}{
		{"defaults to the Cluster's namespace", "", "fleet-default/c1-kubeconfig"},
		{"spec.kubeConfigSecretNamespace wins", "cluster-kubeconfigs", "cluster-kubeconfigs/c1-kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newSource(kcSecret("fleet-default", "c1-kubeconfig", "1", "https://in-cluster-ns"),
				kcSecret("cluster-kubeconfigs", "c1-kubeconfig", "1", "https://in-other-ns"))
			c := newTestCache(t, src, &fakes{}, nil)
			cl, err := c.Get(context.Background(), cluster("fleet-default", "c1", "c1-kubeconfig", tc.secretNS))
			if err != nil {
				t.Fatal(err)
			}
			for key, n := range src.gets {
				if want := map[bool]int{true: 1}[key == tc.wantRead]; n != want {
					t.Errorf("Secret %s read %d times, want %d", key, n, want)
				}
			}
			if want := src.secrets[tc.wantRead]; !strings.Contains(string(want.Data["value"]), cl.Config.Host) {
				t.Errorf("client talks to %s, not to the server in %s", cl.Config.Host, tc.wantRead)
			}
		})
	}
}

func TestRESTConfig(t *testing.T) {
	tests := []struct {
		name          string
		opts          Options
		wantTimeout   time.Duration
		wantUserAgent string
		wantQPS       float32
	}{
		{"defaults", Options{}, 10 * time.Second, "courier", QPS},
		{"options", Options{Timeout: 3 * time.Second, UserAgent: "courier/test",
			NewConfig: func(c *rest.Config) (*rest.Config, error) { c.QPS, c.Burst = 42, 84; return c, nil }},
			3 * time.Second, "courier/test", 42},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fakes{}
			o := tc.opts
			o.WatchSelector, o.NewClientset = managed, fk.newClientset
			c := NewCache(newSource(kcSecret("ns", "kc", "1", "https://10.0.0.1:6443")), o)
			defer c.Stop()
			cl, err := c.Get(context.Background(), cluster("ns", "c1", "kc", ""))
			if err != nil {
				t.Fatal(err)
			}
			if cl.Key != "ns/c1" || cl.Config.Host != "https://10.0.0.1:6443" || cl.Config.BearerToken != fakeToken {
				t.Errorf("Key %q, host %q: not as the kubeconfig says", cl.Key, cl.Config.Host)
			}
			if cl.Config.Timeout != tc.wantTimeout || cl.Config.UserAgent != tc.wantUserAgent || cl.Config.QPS != tc.wantQPS {
				t.Errorf("Timeout %v, UserAgent %q, QPS %v; want %v, %q, %v",
					cl.Config.Timeout, cl.Config.UserAgent, cl.Config.QPS, tc.wantTimeout, tc.wantUserAgent, tc.wantQPS)
			}
			if len(fk.configs) != 2 {
				t.Fatalf("built %d clientsets, want 2 (requests, informers)", len(fk.configs))
			}
			kube, watch := fk.configs[0], fk.configs[1]
			if kube.Timeout != tc.wantTimeout || watch.Timeout != 0 {
				t.Errorf("Kube timeout %v, informer timeout %v; want %v, 0 (a timeout would cut watches)", kube.Timeout, watch.Timeout, tc.wantTimeout)
			}
			if watch.UserAgent != tc.wantUserAgent || watch.Host != kube.Host || watch.BearerToken != kube.BearerToken || watch.QPS != tc.wantQPS {
				t.Errorf("informer config differs from Kube's beyond Timeout")
			}
			if !watch.DisableCompression || kube.DisableCompression {
				t.Errorf("DisableCompression: informers %t, Kube %t; want true, false (a gzip watch holds a 32 KiB window)", watch.DisableCompression, kube.DisableCompression)
			}
			if watch.RateLimiter == nil || watch.RateLimiter != kube.RateLimiter {
				t.Error("the informers and Kube do not share one rate limiter")
			}
		})
	}
}

func TestReuseAndRebuild(t *testing.T) {
	src := newSource(kcSecret("fleet-default", "kc", "1", "https://one"))
	fk := &fakes{}
	c := newTestCache(t, src, fk, nil)
	cl1 := cluster("fleet-default", "c1", "kc", "")
	ctx := context.Background()

	first, err := c.Get(ctx, cl1)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := c.Get(ctx, cl1)
		if err != nil || again != first {
			t.Fatalf("Get while the RV is unchanged = %p, %v; want the same client %p", again, err, first)
		}
	}
	if n := src.getCount("fleet-default/kc"); n != 1 {
		t.Errorf("Secret read %d times while its RV did not change, want 1", n)
	}

	src.put(kcSecret("fleet-default", "kc", "2", "https://two"))
	second, err := c.Get(ctx, cl1)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || second.Config.Host != "https://two" {
		t.Fatalf("not rebuilt after the Secret changed: host %s", second.Config.Host)
	}
	if n := src.getCount("fleet-default/kc"); n != 2 {
		t.Errorf("Secret read %d times, want 2", n)
	}
	waitDone(t, first)
	if stopped(second) {
		t.Error("the new client's informers were stopped")
	}

	// The Secret is deleted: the error is reported and the client stopped.
	src.mu.Lock()
	delete(src.secrets, "fleet-default/kc")
	src.mu.Unlock()
	if _, err := c.Get(ctx, cl1); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Get after the Secret was deleted: %v", err)
	}
	waitDone(t, second)
}

func TestSourceLagDoesNotRebuild(t *testing.T) {
	src := newSource(kcSecret("ns", "kc", "6", "https://one"))
	src.lagRV["ns/kc"] = "5" // the metadata informer has not seen RV 6 yet
	fk := &fakes{}
	c := newTestCache(t, src, fk, nil)
	first, err := c.Get(context.Background(), cluster("ns", "c1", "kc", ""))
	if err != nil {
		t.Fatal(err)
	}
	delete(src.lagRV, "ns/kc") // it catches up: a new RV, but the same Secret
	again, err := c.Get(context.Background(), cluster("ns", "c1", "kc", ""))
	if err != nil || again != first || stopped(first) || fk.calls() != 2 {
		t.Fatalf("rebuilt for a Secret that did not change (same client: %v, stopped: %v, clientsets: %d, err: %v)",
			again == first, stopped(first), fk.calls(), err)
	}
	if _, err := c.Get(context.Background(), cluster("ns", "c1", "kc", "")); err != nil || src.getCount("ns/kc") != 2 {
		t.Errorf("Secret read %d times, want 2 (%v)", src.getCount("ns/kc"), err)
	}
}

func TestKubeconfigErrorCachedUntilSecretChanges(t *testing.T) {
	src := newSource(secret("ns", "kc", "1", map[string][]byte{"wrong": []byte("x")}))
	c := newTestCache(t, src, &fakes{}, nil)
	cl := cluster("ns", "c1", "kc", "")
	for range 3 {
		if _, err := c.Get(context.Background(), cl); err == nil {
			t.Fatal("want an error for a Secret without value")
		}
	}
	if n := src.getCount("ns/kc"); n != 1 {
		t.Errorf("broken Secret read %d times, want 1", n)
	}
	src.put(kcSecret("ns", "kc", "2", "https://fixed"))
	if got, err := c.Get(context.Background(), cl); err != nil || got.Config.Host != "https://fixed" {
		t.Fatalf("Get after the Secret was fixed = %v, %v", got, err)
	}

	// A missing Secret is not re-read either, until it appears.
	c.Forget("ns/c1")
	cl2 := cluster("ns", "c2", "missing", "")
	for range 3 {
		if _, err := c.Get(context.Background(), cl2); err == nil {
			t.Fatal("want an error for a missing Secret")
		}
	}
	if n := src.getCount("ns/missing"); n != 1 {
		t.Errorf("missing Secret read %d times, want 1", n)
	}
	src.put(kcSecret("ns", "missing", "7", "https://appeared"))
	if _, err := c.Get(context.Background(), cl2); err != nil {
		t.Fatalf("Get after the Secret appeared: %v", err)
	}
}

func TestTransientReadErrorNotCached(t *testing.T) {
	src := newSource(kcSecret("ns", "kc", "1", "https://one"))
	c := newTestCache(t, src, &fakes{}, nil)
	cl := cluster("ns", "c1", "kc", "")
	first, err := c.Get(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	src.put(kcSecret("ns", "kc", "2", "https://two"))
	src.getErr = apierrors.NewServiceUnavailable("upstream is restarting")
	for range 2 {
		_, err := c.Get(context.Background(), cl)
		var ke *KubeconfigError
		if err == nil || errors.As(err, &ke) || !strings.Contains(err.Error(), "upstream is restarting") {
			t.Fatalf("Get with a failing upstream = %v; want the upstream error, not a KubeconfigError", err)
		}
	}
	if n := src.getCount("ns/kc"); n != 3 {
		t.Errorf("Secret read %d times, want 3 (an upstream error must not be cached)", n)
	}
	if stopped(first) {
		t.Error("a transient upstream error stopped the working client")
	}
	src.getErr = nil
	if got, err := c.Get(context.Background(), cl); err != nil || got.Config.Host != "https://two" {
		t.Fatalf("Get after upstream recovered = %v, %v", got, err)
	}
}

func TestConcurrentGetBuildsOnce(t *testing.T) {
	src := newSource(kcSecret("ns", "kc", "1", "https://one"))
	src.hold = make(chan struct{})
	src.entered = make(chan string, 100)
	fk := &fakes{}
	c := newTestCache(t, src, fk, nil)
	const n = 16
	results := make([]*Client, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cl, err := c.Get(context.Background(), cluster("ns", "c1", "kc", ""))
			if err != nil {
				t.Error(err)
			}
			results[i] = cl
		})
	}
	recv(t, src.entered, "a Get to read the Secret") // let the others pile up behind it
	time.Sleep(50 * time.Millisecond)
	close(src.hold)
	wg.Wait()
	for i, cl := range results {
		if cl == nil || cl != results[0] {
			t.Fatalf("Get %d returned %p, Get 0 returned %p", i, cl, results[0])
		}
	}
	if got := src.getCount("ns/kc"); got != 1 {
		t.Errorf("Secret read %d times by %d concurrent Gets, want 1", got, n)
	}
	if got := fk.calls(); got != 2 {
		t.Errorf("built %d clientsets, want 2 (one client)", got)
	}
}

// A cluster whose Secret read hangs does not delay another cluster (docs/design.md#better-than-fleet), and a caller
// waiting behind it can give up.
func TestSlowClusterDoesNotDelayOthers(t *testing.T) {
	slow := &slowSource{fakeSource: newSource(kcSecret("ns", "slow", "1", "https://slow"), kcSecret("ns", "fast", "1", "https://fast")),
		slowKey: "ns/slow", release: make(chan struct{}), entered: make(chan struct{})}
	c := newTestCache(t, slow, &fakes{}, nil)
	defer close(slow.release)
	go func() { _, _ = c.Get(context.Background(), cluster("ns", "s", "slow", "")) }()
	recv(t, slow.entered, "the slow cluster's Secret read")

	done := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), cluster("ns", "f", "fast", ""))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get for a healthy cluster waited for a slow one")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Get(ctx, cluster("ns", "s", "slow", "")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second Get of the slow cluster = %v, want its context's error", err)
	}
}

type slowSource struct {
	*fakeSource
	slowKey string
	release chan struct{}
	entered chan struct{}
}

func (s *slowSource) Get(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	if ns+"/"+name == s.slowKey {
		close(s.entered)
		<-s.release
	}
	return s.fakeSource.Get(ctx, ns, name)
}

func TestInformersWatchCopiesAndCallOnChange(t *testing.T) {
	unmanaged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "someone-elses"}, Data: map[string][]byte{"k": []byte("v")}}
	fk := &fakes{objects: []runtime.Object{unmanaged}}
	var (
		mu      sync.Mutex
		changes []string
	)
	onChange := func(key string, _ runtime.Object) { mu.Lock(); changes = append(changes, key); mu.Unlock() }
	changed := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), changes...) }

	src := newSource(kcSecret("fleet-default", "kc", "1", "https://c1"))
	c := newTestCache(t, src, fk, onChange)
	// Record the label selector of every list and watch the informers make.
	fk.mu.Lock()
	fk.sets = map[string]*fake.Clientset{"https://c1": fake.NewClientset(unmanaged)}
	fc := fk.sets["https://c1"]
	fk.mu.Unlock()
	var selMu sync.Mutex
	selectors := map[string]string{}
	record := func(a k8stesting.Action) {
		var sel labels.Selector
		switch a := a.(type) {
		case k8stesting.ListAction:
			sel = a.GetListRestrictions().Labels
		case k8stesting.WatchAction:
			sel = a.GetWatchRestrictions().Labels
		default:
			return
		}
		selMu.Lock()
		selectors[a.GetVerb()+" "+a.GetResource().Resource] = sel.String()
		selMu.Unlock()
	}
	fc.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) { record(a); return false, nil, nil })
	fc.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) { record(a); return false, nil, nil })

	cl, err := c.Get(context.Background(), cluster("fleet-default", "c1", "kc", ""))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "informers to sync", cl.HasSynced)
	// An informer counts as synced once its list is in; its watch starts
	// just after.
	requests := []string{"list secrets", "watch secrets", "list configmaps", "watch configmaps"}
	waitFor(t, "the informers' watches", func() bool {
		selMu.Lock()
		defer selMu.Unlock()
		for _, k := range requests {
			if _, ok := selectors[k]; !ok {
				return false
			}
		}
		return true
	})
	selMu.Lock()
	for _, k := range requests {
		if selectors[k] != cl.Selector {
			t.Errorf("%s used label selector %q, want %q", k, selectors[k], cl.Selector)
		}
	}
	selMu.Unlock()
	if all, _ := cl.Secrets.List(labels.Everything()); len(all) != 0 {
		t.Errorf("Secret cache holds %d objects not labelled as Courier's copies", len(all))
	}
	if len(changed()) != 0 {
		t.Errorf("OnChange called %v before anything changed", changed())
	}

	copyLabels := map[string]string{"courier.dev/managed-by": "courier"}
	ctx := context.Background()
	if _, err := cl.Kube.CoreV1().Secrets("app").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "copy", Labels: copyLabels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OnChange after a Secret copy was added", func() bool { return len(changed()) == 1 })
	if _, err := cl.Secrets.Secrets("app").Get("copy"); err != nil {
		t.Errorf("lister does not see the added copy: %v", err)
	}
	if _, err := cl.Kube.CoreV1().ConfigMaps("app").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "cm", Labels: copyLabels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OnChange after a ConfigMap copy was added", func() bool { return len(changed()) == 2 })
	if err := cl.Kube.CoreV1().ConfigMaps("app").Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OnChange after a copy was deleted", func() bool { return len(changed()) == 3 })
	for _, k := range changed() {
		if k != "fleet-default/c1" {
			t.Errorf("OnChange(%q), want fleet-default/c1", k)
		}
	}
}

func TestForgetAndStop(t *testing.T) {
	src := newSource(kcSecret("ns", "kc1", "1", "https://one"), kcSecret("ns", "kc2", "1", "https://two"))
	fk := &fakes{}
	c := NewCache(src, Options{WatchSelector: managed, NewClientset: fk.newClientset})
	ctx := context.Background()
	base := gaugeValue(t, clientsOpen)
	one, err1 := c.Get(ctx, cluster("ns", "c1", "kc1", ""))
	two, err2 := c.Get(ctx, cluster("ns", "c2", "kc2", ""))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	waitFor(t, "informers to sync", func() bool { return one.HasSynced() && two.HasSynced() })
	if n := gaugeValue(t, clientsOpen) - base; n != 2 {
		t.Errorf("courier_downstream_clients rose by %v for two clients", n)
	}

	c.Forget("ns/c1")
	waitDone(t, one)
	if n := gaugeValue(t, clientsOpen) - base; n != 1 {
		t.Errorf("courier_downstream_clients is %v above the start after a Forget, want 1", n)
	}
	if stopped(two) {
		t.Fatal("Forget of c1 stopped c2")
	}
	again, err := c.Get(ctx, cluster("ns", "c1", "kc1", ""))
	if err != nil || again == one {
		t.Fatalf("Get after Forget = %p, %v; want a new client", again, err)
	}
	c.Forget("ns/unknown") // no-op

	c.Stop()
	for _, cl := range []*Client{two, again} {
		if !stopped(cl) {
			t.Errorf("Stop left %s running", cl.Key)
		}
		select {
		case <-cl.done:
		default:
			t.Errorf("Stop returned before %s's informers shut down", cl.Key)
		}
	}
	if _, err := c.Get(ctx, cluster("ns", "c2", "kc2", "")); err == nil {
		t.Error("Get after Stop succeeded")
	}
	c.Stop() // idempotent
	if n := gaugeValue(t, clientsOpen) - base; n != 0 {
		t.Errorf("courier_downstream_clients is %v above the start after Stop", n)
	}
}

// A Get that found a cluster's entry just before Forget dropped it starts over with a new
// entry instead of using the dropped one.
func TestGetAfterConcurrentForget(t *testing.T) {
	src := newSource(kcSecret("ns", "kc", "1", "https://one"))
	c := newTestCache(t, src, &fakes{}, nil)
	cl := cluster("ns", "c1", "kc", "")
	first, err := c.Get(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	testHookUnlocked = func() { testHookUnlocked = nil; c.Forget("ns/c1") }
	defer func() { testHookUnlocked = nil }()
	second, err := c.Get(context.Background(), cl)
	if err != nil || second == nil || second == first {
		t.Fatalf("Get racing Forget = %p, %v; want a new client (old one %p)", second, err, first)
	}
	waitDone(t, first)
	c.Stop()
	if !stopped(second) {
		t.Error("the client built after Forget is out of Stop's reach")
	}
}

func TestChangeHandler(t *testing.T) {
	obj := func(rv string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	}
	tests := []struct {
		name string
		call func(h toolscache.ResourceEventHandler)
		want int
		// wantRV is the resourceVersion of the object changed receives; ""
		// means nil (a deletion).
		wantRV string
	}{
		{"add", func(h toolscache.ResourceEventHandler) { h.OnAdd(obj("1"), false) }, 1, "1"},
		{"update", func(h toolscache.ResourceEventHandler) { h.OnUpdate(obj("1"), obj("2")) }, 1, "2"},
		{"relist (same RV)", func(h toolscache.ResourceEventHandler) { h.OnUpdate(obj("1"), obj("1")) }, 0, ""},
		{"delete", func(h toolscache.ResourceEventHandler) { h.OnDelete(obj("1")) }, 1, ""},
		{"delete, final state unknown", func(h toolscache.ResourceEventHandler) {
			h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/x", Obj: obj("1")})
		}, 1, ""},
	}
	for _, tc := range tests {
		n := 0
		gotRV := ""
		tc.call(changeHandler(func(o runtime.Object) {
			n++
			if m, err := meta.Accessor(o); o != nil && err == nil {
				gotRV = m.GetResourceVersion()
			}
		}))
		if n != tc.want {
			t.Errorf("%s: changed %d times, want %d", tc.name, n, tc.want)
		}
		if gotRV != tc.wantRV {
			t.Errorf("%s: changed saw resourceVersion %q, want %q", tc.name, gotRV, tc.wantRV)
		}
	}
}

// Gets racing Forget never return (nil, nil) and never leave a client running that Stop
// cannot reach.
func TestGetRacingForget(t *testing.T) {
	src := newSource(kcSecret("ns", "kc", "1", "https://one"))
	c := NewCache(src, Options{WatchSelector: managed, NewClientset: (&fakes{}).newClientset})
	var (
		mu   sync.Mutex
		got  []*Client
		wg   sync.WaitGroup
		none atomic.Int32
	)
	for range 50 {
		for range 3 {
			wg.Go(func() {
				cl, err := c.Get(context.Background(), cluster("ns", "c1", "kc", ""))
				if cl == nil && err == nil {
					none.Add(1)
				}
				if cl != nil {
					mu.Lock()
					got = append(got, cl)
					mu.Unlock()
				}
			})
		}
		wg.Go(func() { c.Forget("ns/c1") })
	}
	wg.Wait()
	c.Stop()
	if n := none.Load(); n > 0 {
		t.Errorf("%d Gets returned neither a client nor an error", n)
	}
	leaked := 0
	for _, cl := range got {
		select {
		case <-cl.done:
		default:
			leaked++
		}
	}
	if leaked > 0 {
		t.Errorf("%d of %d clients still running after Stop", leaked, len(got))
	}
}

func TestNewCacheRequiresSelector(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewCache without WatchSelector did not panic")
		}
	}()
	NewCache(newSource(), Options{})
}

// Each Cluster's informers select only its own copies, even when two
// Clusters reach one kube-apiserver: every list and watch they make carries
// their own selector. (The fake clientset does not filter watches by label;
// the e2e suite checks the real kube-apiserver's filtering.)
func TestInformersSelectTheirClustersCopies(t *testing.T) {
	fk := &fakes{}
	src := newSource(kcSecret("fleet-default", "kc", "1", "https://shared"))
	c := NewCache(src, Options{WatchSelector: managed, NewClientset: fk.newClientset})
	t.Cleanup(c.Stop)
	fk.mu.Lock()
	fk.sets = map[string]*fake.Clientset{"https://shared": fake.NewClientset()}
	fc := fk.sets["https://shared"]
	fk.mu.Unlock()
	sels := recordSelectors(fc)
	mu, seen := &sels.mu, sels.seen
	ctx := context.Background()
	var clients []*Client
	for _, name := range []string{"c1", "c2"} {
		cl, err := c.Get(ctx, cluster("fleet-default", name, "kc", ""))
		if err != nil {
			t.Fatal(err)
		}
		if want := managed(cluster("fleet-default", name, "kc", "")).String(); cl.Selector != want {
			t.Errorf("%s's selector %q, want %q", name, cl.Selector, want)
		}
		clients = append(clients, cl)
	}
	waitFor(t, "both clusters' lists and watches", func() bool {
		mu.Lock()
		defer mu.Unlock()
		// Two informers each: a list and a watch per informer.
		return seen[clients[0].Selector] >= 4 && seen[clients[1].Selector] >= 4
	})
	mu.Lock()
	defer mu.Unlock()
	for sel, n := range seen {
		if sel != clients[0].Selector && sel != clients[1].Selector {
			t.Errorf("%d requests selected %q, which is neither Cluster's own", n, sel)
		}
	}
}

// selectorLog counts the lists and watches a fake clientset was sent, by
// label selector.
type selectorLog struct {
	mu   sync.Mutex
	seen map[string]int
}

// recordSelectors makes fc count its lists and watches by label selector.
func recordSelectors(fc *fake.Clientset) *selectorLog {
	l := &selectorLog{seen: map[string]int{}}
	record := func(sel labels.Selector) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen[sel.String()]++
	}
	fc.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		record(a.(k8stesting.ListAction).GetListRestrictions().Labels)
		return false, nil, nil
	})
	fc.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		record(a.(k8stesting.WatchAction).GetWatchRestrictions().Labels)
		return false, nil, nil
	})
	return l
}

func TestKubeconfigNamespaces(t *testing.T) {
	tests := []struct {
		ns      string
		allowed bool
	}{
		{"", true}, // the Cluster's own
		{"ws", true},
		{"fleet-local", true},
		{"fleet-default", true},
		{"cattle-fleet-system", true},
		{"cattle-fleet-clusters-system", true},
		{"cluster-abc", true},
		{"kube-system", false},
		{"other-tenant", false},
		{"xcluster-abc", false},
	}
	for _, tc := range tests {
		t.Run(tc.ns, func(t *testing.T) {
			ref := tc.ns
			if ref == "" {
				ref = "ws"
			}
			src := newSource(kcSecret(ref, "kc", "1", "https://c1"))
			c := NewCache(src, Options{WatchSelector: managed, NewClientset: (&fakes{}).newClientset})
			t.Cleanup(c.Stop)
			_, err := c.Get(context.Background(), cluster("ws", "c1", "kc", tc.ns))
			if tc.allowed {
				if err != nil {
					t.Fatalf("kubeconfig in %s refused: %v", ref, err)
				}
				return
			}
			var kerr *KubeconfigError
			if !errors.As(err, &kerr) || !strings.Contains(kerr.Msg, fmt.Sprintf("%q is not allowed", tc.ns)) {
				t.Fatalf("kubeconfig in %s: got %v, want a KubeconfigError naming the namespace", tc.ns, err)
			}
			if n := src.getCount(ref + "/kc"); n != 0 {
				t.Errorf("the refused Secret was read %d times", n)
			}
		})
	}
}

// Objects picked by ForeignSelector (Fleet's copies) are watched without
// their data: a change reaches OnChange with nil, and the cache holds only
// metadata.
func TestForeignObjectsWatchedWithoutData(t *testing.T) {
	fk := &fakes{}
	var mu sync.Mutex
	var calls []runtime.Object
	onChange := func(_ string, obj runtime.Object) { mu.Lock(); calls = append(calls, obj); mu.Unlock() }
	src := newSource(kcSecret("fleet-default", "kc", "1", "https://c1"))
	c := NewCache(src, Options{WatchSelector: managed, NewClientset: fk.newClientset, OnChange: onChange,
		ForeignSelector: labels.SelectorFromSet(labels.Set{"fleet": "yes"})})
	t.Cleanup(c.Stop)
	cl, err := c.Get(context.Background(), cluster("fleet-default", "c1", "kc", ""))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the foreign informer to sync", cl.set.foreign.synced)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "fleets", Labels: map[string]string{"fleet": "yes"}},
		Data: map[string][]byte{"k": []byte(fakeToken)}}
	if _, err := cl.Kube.CoreV1().Secrets("app").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The fake clientset ignores label selectors, so Courier's own informers
	// hear of the object too; the foreign informer's call is the one with
	// nil (the pass reads the object live).
	waitFor(t, "OnChange(nil) for the foreign object", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(calls, runtime.Object(nil))
	})
	cached, err := cl.set.foreignSecrets.Secrets("app").Get("fleets")
	if err != nil {
		t.Fatalf("the foreign object is not cached: %v", err)
	}
	if len(cached.Data) != 0 {
		t.Error("the foreign object's data is cached")
	}
}
