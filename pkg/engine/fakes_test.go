package engine

// The test harness: an upstream fake clientset holding the sources, one fake
// downstream cluster (fake clientset + listers over indexers, HasSynced under
// the test's control), Cluster and HelmOp listers over indexers, a fake
// Recorder and a buffering logger. Every test's statuses, Events and log
// lines are checked for the canary secret value when the test ends.

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/rowname"
)

const (
	upstreamID = "up-1"
	fleetNS    = "fleet-default"
	targetNS   = "apps"
	clusterKey = fleetNS + "/c1"
	// canary is the data of every source Secret in these tests. No status
	// message, Event or log line may ever contain it.
	canary = "canary-5e6f0a1b9c2d7781"
	// appOwnerHash is copyspec.OwnerHash(upstreamID, appOp), pinned as in
	// pkg/copyspec's tests: copies already written downstream carry it.
	appOwnerHash = "8443496d37e098f22ceea25ae20974128b96a5f9"
	// c1ClusterHash is copyspec.ClusterHash(upstreamID, fleetNS, "c1"),
	// pinned likewise: it is the public label value (docs/design.md#public-names).
	c1ClusterHash = "94ec9ebc97f61e9f1f500e5d4f45e6bb4271f956"
	// c1Selector is what cluster c1's informers and live lists select.
	c1Selector = "courier.dev/cluster-hash=" + c1ClusterHash + ",courier.dev/managed-by=courier"
	// downHost is the fake downstream cluster's server URL.
	downHost = "https://down-1.example:6443"
)

var (
	appOp    = types.NamespacedName{Namespace: fleetNS, Name: "app"}
	otherOp  = types.NamespacedName{Namespace: fleetNS, Name: "other"}
	fixedNow = time.Date(2026, 3, 4, 5, 6, 7, 800_000_000, time.UTC)

	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// ---- sources, copies and rows ----

// srcSecret is an upstream Secret in the HelmOps' namespace.
func srcSecret(name, rv string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: name, ResourceVersion: rv, UID: types.UID("src-" + name),
			Labels:      map[string]string{"app.kubernetes.io/name": name},
			Annotations: map[string]string{"team": "payments"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte(canary)},
	}
}

// srcConfigMap is an upstream ConfigMap in the HelmOps' namespace.
func srcConfigMap(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: name, ResourceVersion: rv, UID: types.UID("src-" + name)},
		Data:       map[string]string{"url": "postgres://db.apps:5432"},
	}
}

func owner(op types.NamespacedName, cluster string) copyspec.Owner {
	return copyspec.Owner{UpstreamID: upstreamID, HelmOp: op, Cluster: cluster}
}

// secretCopy is what Courier writes downstream for src in namespace ns
// (built by copyspec, as the engine does), with the UID and resourceVersion
// a stored object has. edit changes it afterwards (drift, forged labels).
func secretCopy(src *corev1.Secret, ns string, o copyspec.Owner, edit ...func(*corev1.Secret)) *corev1.Secret {
	s := copyspec.Secret(src, ns, o)
	s.UID = types.UID("uid-" + ns + "-" + src.Name + "-" + o.HelmOp.Name + "-" + o.UpstreamID + "-" + o.Cluster)
	s.ResourceVersion = "100"
	for _, f := range edit {
		f(s)
	}
	return s
}

func configMapCopy(src *corev1.ConfigMap, ns string, o copyspec.Owner, edit ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	c := copyspec.ConfigMap(src, ns, o)
	c.UID = types.UID("uid-" + ns + "-" + src.Name + "-" + o.HelmOp.Name + "-" + o.UpstreamID + "-" + o.Cluster)
	c.ResourceVersion = "100"
	for _, f := range edit {
		f(c)
	}
	return c
}

// unmanagedSecret is someone else's Secret: no Courier labels.
func unmanagedSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("theirs-" + name), ResourceVersion: "50"},
		Data:       map[string][]byte{"password": []byte("theirs")},
	}
}

// row is a DownstreamCopy as pkg/copyview builds it, for HelmOp app and
// Cluster c1, targeting namespace apps with the source's name.
func row(kind, name, rv string, phase courier.CopyPhase) *courier.DownstreamCopy {
	return rowFor(appOp.Name, "c1", kind, name, rv, phase)
}

func rowFor(helmOp, cluster, kind, name, rv string, phase courier.CopyPhase) *courier.DownstreamCopy {
	return &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: rowname.Unique(helmOp, cluster, strings.ToLower(kind), name)},
		Spec: courier.DownstreamCopySpec{
			HelmOp:  helmOp,
			Cluster: cluster,
			Source:  courier.CopySource{Kind: kind, Name: name, ResourceVersion: rv},
			Target:  courier.CopyTarget{Namespace: targetNS, Name: name},
		},
		Status: courier.DownstreamCopyStatus{Phase: phase},
	}
}

func keyOf(r *courier.DownstreamCopy) string { return r.Namespace + "/" + r.Name }

// ---- the downstream cluster ----

// fakeCluster is one downstream cluster. Its listers hold what Courier's
// label-filtered informers would: only objects labelled managed-by=courier.
type fakeCluster struct {
	kube       *fake.Clientset
	secrets    cache.Indexer
	configMaps cache.Indexer
	synced     bool
	// foreignWatched says the client watches Fleet's copies and holds the
	// names in foreign (MayHaveForeign); otherwise it cannot tell, as a
	// client without that watch, and the engine reads before creating.
	foreignWatched bool
	foreign        map[string]bool // "<namespace>/<name>"
	// foreignObjs are the objects that watch holds (ForeignAt), by
	// "<namespace>/<name>".
	foreignObjs map[string]metav1.Object
}

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func newFakeCluster(synced bool, objs ...runtime.Object) *fakeCluster {
	c := &fakeCluster{kube: fake.NewClientset(objs...), secrets: newIndexer(), configMaps: newIndexer(), synced: synced}
	for _, o := range objs {
		if m, err := meta.Accessor(o); err != nil || m.GetLabels()[copyspec.LabelManagedBy] != copyspec.ManagedByValue {
			continue
		}
		c.cache(o)
	}
	return c
}

// cache puts obj into the informer's indexer, whatever its labels.
func (c *fakeCluster) cache(obj runtime.Object) {
	switch obj.(type) {
	case *corev1.Secret:
		_ = c.secrets.Add(obj)
	case *corev1.ConfigMap:
		_ = c.configMaps.Add(obj)
	}
}

func (c *fakeCluster) client() *downstream.Client {
	return &downstream.Client{
		Key:        clusterKey,
		Kube:       c.kube,
		Secrets:    corev1listers.NewSecretLister(c.secrets),
		ConfigMaps: corev1listers.NewConfigMapLister(c.configMaps),
		HasSynced:  func() bool { return c.synced },
		Selector:   c1Selector,
		Config:     &rest.Config{Host: downHost},
		MayHaveForeign: func(kind, ns, name string) bool {
			return !c.foreignWatched || c.foreign[ns+"/"+name]
		},
		ForeignAt: func(kind, ns, name string) (metav1.Object, bool, bool) {
			if !c.foreignWatched {
				return nil, false, false
			}
			obj, ok := c.foreignObjs[ns+"/"+name]
			return obj, ok, true
		},
	}
}

// fail makes every matching request fail with err (it is still recorded
// as an action).
func (c *fakeCluster) fail(verb, resource string, err error) {
	c.kube.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
}

// secret reads a Secret from the fake's store without recording an action.
func (c *fakeCluster) secret(ns, name string) (*corev1.Secret, bool) {
	obj, err := c.kube.Tracker().Get(secretsGVR, ns, name)
	if err != nil {
		return nil, false
	}
	return obj.(*corev1.Secret), true
}

func (c *fakeCluster) configMap(ns, name string) (*corev1.ConfigMap, bool) {
	obj, err := c.kube.Tracker().Get(configMapsGVR, ns, name)
	if err != nil {
		return nil, false
	}
	return obj.(*corev1.ConfigMap), true
}

// connRefused is the error client-go returns when nothing listens.
func connRefused() error {
	return &url.Error{Op: "Post", URL: "https://10.0.0.7:6443/api/v1/namespaces/apps/secrets",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
}

// fakeDownstream hands out one client, or an error.
type fakeDownstream struct {
	client    *downstream.Client
	err       error
	gets      int
	forgotten []string
}

func (f *fakeDownstream) Get(_ context.Context, _ *fleet.Cluster) (*downstream.Client, error) {
	f.gets++
	if f.err != nil {
		return nil, f.err
	}
	return f.client, nil
}

func (f *fakeDownstream) Forget(key string) { f.forgotten = append(f.forgotten, key) }

// ---- the engine under test ----

type testEnv struct {
	t             testing.TB
	e             *Engine
	upstream      *fake.Clientset
	down          *fakeCluster
	ds            *fakeDownstream
	recorder      *record.FakeRecorder
	events        []string
	logs          ktesting.Buffer
	ctx           context.Context
	statusChanges int
	changes       []copycontract.StatusChange // as told to OnStatusChange
	// ops are the HelmOps setDesired handed rows for last time.
	ops map[types.NamespacedName]bool
}

// newEnv builds an engine for upstream sources and one downstream cluster
// (down may be nil). Clusters c1, c2 and c3 exist in fleet-default.
func newEnv(t testing.TB, down *fakeCluster, sources ...runtime.Object) *testEnv {
	t.Helper()
	clusters := newIndexer()
	for _, name := range []string{"c1", "c2", "c3"} {
		_ = clusters.Add(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: name},
			Spec: fleet.ClusterSpec{KubeConfigSecret: name + "-kubeconfig"}})
	}
	helmOps := newIndexer()
	for _, op := range []types.NamespacedName{appOp, otherOp} {
		_ = helmOps.Add(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: op.Namespace, Name: op.Name, UID: types.UID("op-" + op.Name)}})
	}
	env := &testEnv{t: t, upstream: fake.NewClientset(sources...), down: down, ds: &fakeDownstream{},
		recorder: record.NewFakeRecorder(100)}
	if down != nil {
		env.ds.client = down.client()
	}
	env.e = New(Config{
		UpstreamID: upstreamID,
		Upstream:   env.upstream,
		Clusters:   fleetlisters.NewClusterLister(clusters),
		HelmOps:    fleetlisters.NewHelmOpLister(helmOps),
		Downstream: env.ds,
		Recorder:   env.recorder,
		SyncWait:   -1, // the fakes' HasSynced says what each test wants at once
		// One write at a time, so that tests can name the order of
		// requests; TestGroupWritesAtOnce covers several.
		GroupWriters: 1,
		OnStatusChange: func(ch []copycontract.StatusChange) {
			env.statusChanges++
			env.changes = append(env.changes, ch...)
		},
	})
	env.e.now = func() time.Time { return fixedNow }
	if down != nil {
		// Copies written before the cluster-hash label existed are looked
		// for once per client; TestLegacySweep covers that look.
		env.e.clients.legacySwept(clusterKey, env.ds.client)
	}
	t.Cleanup(env.e.queue.ShutDown)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
	env.logs = logger.GetSink().(ktesting.Underlier).GetBuffer()
	env.ctx = klog.NewContext(context.Background(), logger)
	t.Cleanup(env.checkNoSecretData)
	return env
}

// setDesired hands the engine every row there is, as the view's first
// pass does: each HelmOp's rows (nil for a HelmOp that had rows the last
// time and has none now), then DesiredComplete.
func (env *testEnv) setDesired(rows ...*courier.DownstreamCopy) {
	byOp := map[types.NamespacedName][]*courier.DownstreamCopy{}
	for _, r := range rows {
		op := types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.HelmOp}
		byOp[op] = append(byOp[op], r)
	}
	for op := range env.ops {
		if _, ok := byOp[op]; !ok {
			env.e.SetDesired(op, nil)
		}
	}
	env.ops = map[types.NamespacedName]bool{}
	for op, rs := range byOp {
		env.ops[op] = true
		env.e.SetDesired(op, rs)
	}
	env.e.DesiredComplete()
}

// reconcile hands the engine rows and reconciles cluster c1 once.
func (env *testEnv) reconcile(rows ...*courier.DownstreamCopy) error {
	env.setDesired(rows...)
	drain(env.e.queue)
	return env.e.reconcileCluster(env.ctx, clusterKey)
}

// leftovers returns every HelmOp's leftover copies.
func (env *testEnv) leftovers() []copycontract.Leftover {
	var out []copycontract.Leftover
	for _, op := range leftoverOps(env.e.statuses) {
		out = append(out, env.e.Leftovers(op)...)
	}
	return out
}

func (env *testEnv) status(r *courier.DownstreamCopy) (copycontract.Status, bool) {
	return env.e.Status(keyOf(r))
}

// mustStatus returns a row's status, failing the test if there is none.
func (env *testEnv) mustStatus(r *courier.DownstreamCopy) copycontract.Status {
	env.t.Helper()
	st, ok := env.status(r)
	if !ok {
		env.t.Fatalf("no status recorded for row %s", keyOf(r))
	}
	return st
}

// takeEvents returns the Events recorded since the last call.
func (env *testEnv) takeEvents() []string {
	var out []string
	for {
		select {
		case ev := <-env.recorder.Events:
			env.events = append(env.events, ev)
			out = append(out, ev)
		default:
			return out
		}
	}
}

// checkNoSecretData fails the test if the canary appears in any status
// message, Event or log line the engine produced.
func (env *testEnv) checkNoSecretData() {
	env.takeEvents()
	env.e.statuses.mu.Lock()
	var texts []string
	for k, s := range env.e.statuses.statuses {
		texts = append(texts, "status of "+k+": "+s.Message)
	}
	env.e.statuses.mu.Unlock()
	for _, ev := range env.events {
		texts = append(texts, "event: "+ev)
	}
	texts = append(texts, "log: "+env.logs.String())
	for _, s := range texts {
		for _, form := range canaryForms {
			if strings.Contains(s, form) {
				env.t.Errorf("secret data leaked (as %q) into %s", form, s)
			}
		}
	}
}

// canaryForms are the ways the canary may be printed: as text, as the byte
// list %v prints for a []byte, base64 (JSON) and hex. Prefixes, so that
// data with the canary at its start is found too.
var canaryForms = []string{
	canary,
	strings.TrimSuffix(fmt.Sprint([]byte(canary)), "]"),
	base64.StdEncoding.EncodeToString([]byte(canary[:len(canary)/3*3])),
	hex.EncodeToString([]byte(canary)),
}

// ---- actions ----

// actionStrings describes each request as "verb resource [namespace/]name",
// or for a list "list resource selector".
func actionStrings(actions []k8stesting.Action) []string {
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		s := a.GetVerb() + " " + a.GetResource().Resource
		var name string
		switch a.GetVerb() {
		case "get":
			name = a.(k8stesting.GetAction).GetName()
		case "delete":
			name = a.(k8stesting.DeleteAction).GetName()
		case "create", "update":
			m, _ := meta.Accessor(a.(k8stesting.CreateAction).GetObject())
			name = m.GetName()
		case "list":
			out = append(out, s+" "+a.(k8stesting.ListAction).GetListRestrictions().Labels.String())
			continue
		}
		if ns := a.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		out = append(out, s+" "+name)
	}
	return out
}

func (env *testEnv) downActions() []string { return actionStrings(env.down.kube.Actions()) }
func (env *testEnv) upActions() []string   { return actionStrings(env.upstream.Actions()) }

// writes returns the mutating requests among actions.
func writes(actions []k8stesting.Action) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range actions {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete", "deletecollection":
			out = append(out, a)
		}
	}
	return out
}

// findAction returns the first action with verb on resource.
func findAction(actions []k8stesting.Action, verb, resource string) k8stesting.Action {
	for _, a := range actions {
		if a.Matches(verb, resource) {
			return a
		}
	}
	return nil
}

// drain empties the queue and returns what it held, sorted.
func drain(q workqueue.TypedRateLimitingInterface[string]) []string {
	keys := []string{}
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		q.Forget(k)
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// leftoverOps returns the HelmOps that have leftover copies, in name order.
func leftoverOps(r *statusRecord) []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := make([]types.NamespacedName, 0, len(r.leftovers.byOp))
	for op := range r.leftovers.byOp {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].String() < ops[j].String() })
	return ops
}
