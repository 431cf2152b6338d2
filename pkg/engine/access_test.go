package engine

// What the engine keeps per downstream cluster for writing as a
// ServiceAccount (docs/design.md#scale): the impersonating clientsets, the "allowed"
// answers of access reviews, and whether the fallback ServiceAccount
// exists. Several fake clusters, each behind its own downstream.Client; the
// impersonating clientsets the engine builds are fakes over the cluster's
// store that answer access reviews from, and refuse writes outside of, a
// per-cluster list of rights.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/downstream"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
)

const (
	fallbackUser = "system:serviceaccount:cattle-fleet-system:fleet-default"
	deployerUser = "system:serviceaccount:cattle-fleet-system:deployer"
	helperUser   = "system:serviceaccount:cattle-fleet-system:helper"
)

// clusterSet is a Downstream over several clusters: it hands out whatever
// client a test put under the cluster's key.
type clusterSet map[string]*downstream.Client

func (s clusterSet) Get(_ context.Context, c *fleet.Cluster) (*downstream.Client, error) {
	if cl, ok := s[c.Namespace+"/"+c.Name]; ok {
		return cl, nil
	}
	return nil, fmt.Errorf("no client for cluster %s/%s", c.Namespace, c.Name)
}

func (s clusterSet) Forget(string) {}

// listed is one HelmOp's copy of a source, as a row in some clusters.
type listed struct {
	op       types.NamespacedName
	kind     string // Secret (db) or ConfigMap (settings)
	sa       string
	clusters []string
}

// identityWorld is the engine with several downstream clusters.
type identityWorld struct {
	t        *testing.T
	env      *testEnv
	clusters clusterSet
	lister   cache.Indexer // the Fleet Clusters
	down     map[string]*fakeCluster
	copies   []listed
	now      time.Time
	// rights says what a user may do in a cluster, by "<cluster> <user>",
	// as "<verb> <resource> <namespace-or-name>".
	rights map[string][]string
	// builds counts the impersonating clientsets built; asked and wrote
	// are the access reviews and the writes they made since the last take,
	// as "<cluster>#<build> <ServiceAccount> <verb> <resource> <where>".
	builds int
	asked  []string
	wrote  []string
}

// newIdentityWorld starts an engine over clusters with the given names,
// each holding the target namespace and the fallback ServiceAccount.
func newIdentityWorld(t *testing.T, names ...string) *identityWorld {
	env := newEnv(t, nil, srcSecret("db", "1"), srcConfigMap("settings", "1"))
	w := &identityWorld{t: t, env: env, clusters: clusterSet{}, lister: newIndexer(), down: map[string]*fakeCluster{},
		now: fixedNow, rights: map[string][]string{}}
	for _, n := range names {
		w.down[n] = newFakeCluster(true, targetNamespace,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-fleet-system", Name: FallbackServiceAccount}})
		w.clusters[fleetNS+"/"+n] = w.client(n)
		_ = w.lister.Add(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: n}})
	}
	env.e.cfg.Downstream = w.clusters
	env.e.cfg.Clusters = fleetlisters.NewClusterLister(w.lister)
	env.e.now = func() time.Time { return w.now }
	env.e.impersonate.newClient = w.build
	return w
}

// client is a new downstream.Client for the named cluster, as the
// downstream cache builds one (again, when the kubeconfig changed).
func (w *identityWorld) client(name string) *downstream.Client {
	cl := w.down[name].client()
	cl.Key = fleetNS + "/" + name
	cl.Config = &rest.Config{Host: "https://" + name + ".example"}
	return cl
}

func (w *identityWorld) grant(cluster, user string, rights ...string) {
	w.rights[cluster+" "+user] = rights
}

func (w *identityWorld) may(cluster, user, right string) bool {
	for _, r := range w.rights[cluster+" "+user] {
		if r == right {
			return true
		}
	}
	return false
}

// build is the engine's newClient: a fake impersonating clientset over the
// cluster the config reaches.
func (w *identityWorld) build(cfg *rest.Config) (writeClient, error) {
	cluster := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), ".example")
	down, ok := w.down[cluster]
	if !ok {
		return nil, fmt.Errorf("no cluster at %s", cfg.Host)
	}
	user := cfg.Impersonate.UserName
	w.builds++
	who := fmt.Sprintf("%s#%d %s", cluster, w.builds, user[strings.LastIndex(user, ":")+1:])
	cs := &fake.Clientset{}
	cs.AddReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ra := r.Spec.ResourceAttributes
		right := ra.Verb + " " + ra.Resource + " " + ra.Namespace + ra.Name
		w.asked = append(w.asked, who+" "+right)
		r.Status.Allowed = w.may(cluster, user, right)
		return true, r, nil
	})
	cs.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		verb, res := a.GetVerb(), a.GetResource().Resource
		if verb != "create" && verb != "update" && verb != "delete" {
			return false, nil, nil
		}
		var name string
		if o, ok := a.(k8stesting.CreateAction); ok {
			m, _ := meta.Accessor(o.GetObject())
			name = m.GetName()
		}
		where := a.GetNamespace()
		if res == "namespaces" {
			where = name
		}
		if !w.may(cluster, user, verb+" "+res+" "+where) {
			w.wrote = append(w.wrote, who+" "+verb+" "+res+" "+where+" (refused)")
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: res}, name, errors.New("RBAC: access denied"))
		}
		w.wrote = append(w.wrote, who+" "+verb+" "+res+" "+where)
		return false, nil, nil
	})
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(down.kube.Tracker()))
	return cs, nil
}

// pass sets every source to resourceVersion rv, so each copy needs a
// write, and reconciles one cluster.
func (w *identityWorld) pass(cluster, rv string) {
	w.t.Helper()
	ctx := context.Background()
	db, settings := srcSecret("db", rv), srcConfigMap("settings", rv)
	if _, err := w.env.upstream.CoreV1().Secrets(fleetNS).Update(ctx, db, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.env.upstream.CoreV1().ConfigMaps(fleetNS).Update(ctx, settings, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	var rows []*courier.DownstreamCopy
	for _, l := range w.copies {
		name := map[string]string{"Secret": "db", "ConfigMap": "settings"}[l.kind]
		for _, c := range l.clusters {
			r := rowFor(l.op.Name, c, l.kind, name, rv, courier.CopyPhasePending)
			r.Spec.ServiceAccount = l.sa
			rows = append(rows, r)
		}
	}
	w.env.setDesired(rows...)
	drain(w.env.e.queue)
	_ = w.env.e.reconcileCluster(w.env.ctx, fleetNS+"/"+cluster) // Forbidden rows retry: checked by the caller
}

// status is the recorded status of a HelmOp's copy in a cluster.
func (w *identityWorld) status(op types.NamespacedName, cluster, kind string) courier.CopyPhase {
	w.t.Helper()
	name := map[string]string{"Secret": "db", "ConfigMap": "settings"}[kind]
	st, ok := w.env.e.Status(fleetNS + "/" + rowFor(op.Name, cluster, kind, name, "", "").Name)
	if !ok {
		w.t.Fatalf("no status for %s's %s in %s", op.Name, kind, cluster)
	}
	return st.Phase
}

// take returns the access reviews and the writes since the last call.
func (w *identityWorld) take() (asked, wrote []string) {
	asked, wrote = w.asked, w.wrote
	w.asked, w.wrote = nil, nil
	return asked, wrote
}

// expect checks one pass's access reviews and writes.
func (w *identityWorld) expect(step string, asked, wrote []string) {
	w.t.Helper()
	gotAsked, gotWrote := w.take()
	checkActions(w.t, step+": access reviews", gotAsked, asked)
	checkActions(w.t, step+": writes", gotWrote, wrote)
}

// saLookups counts the fallback ServiceAccount lookups made in a cluster.
func (w *identityWorld) saLookups(cluster string) int {
	n := 0
	for _, a := range actionStrings(w.down[cluster].kube.Actions()) {
		if a == saLookup {
			n++
		}
	}
	return n
}

// Two Clusters whose copies are written as the same fallback ServiceAccount
// each keep their impersonating client: alternating writes build one
// client per cluster, not one per write.
func TestSharedServiceAccountClientsPerCluster(t *testing.T) {
	w := newIdentityWorld(t, "c1", "c2")
	w.copies = []listed{{op: appOp, kind: "Secret", clusters: []string{"c1", "c2"}}}
	for _, c := range []string{"c1", "c2"} {
		w.grant(c, fallbackUser, "create secrets apps", "update secrets apps")
	}

	w.pass("c1", "1")
	w.expect("c1 first write", []string{"c1#1 fleet-default create secrets apps"}, []string{"c1#1 fleet-default create secrets apps"})
	w.pass("c2", "2")
	w.expect("c2 first write", []string{"c2#2 fleet-default create secrets apps"}, []string{"c2#2 fleet-default create secrets apps"})
	for i := 3; i <= 8; i++ {
		c := []string{"c1", "c2"}[i%2]
		w.pass(c, strconv.Itoa(i))
		build := map[string]string{"c1": "#1", "c2": "#2"}[c]
		// Every pass writes, through the cluster's first client.
		_, wrote := w.take()
		checkActions(t, "write "+strconv.Itoa(i), wrote, []string{c + build + " fleet-default update secrets apps"})
		if st := w.status(appOp, c, "Secret"); st != courier.CopyPhaseSynced {
			t.Errorf("write %d in %s: phase %s, want Synced", i, c, st)
		}
	}
	if w.builds != 2 {
		t.Errorf("impersonating clients built for 8 alternating writes in 2 clusters = %d, want 2", w.builds)
	}
	// The fallback ServiceAccount was looked up once per cluster, too.
	for _, c := range []string{"c1", "c2"} {
		if n := w.saLookups(c); n != 1 {
			t.Errorf("fallback ServiceAccount lookups in %s = %d, want 1", c, n)
		}
	}
}

// A rebuilt downstream client (new kubeconfig) replaces that cluster's
// impersonating client, access answers and fallback answer, and no other
// cluster's.
func TestRebuiltClusterClientReplacesOnlyItsIdentities(t *testing.T) {
	w := newIdentityWorld(t, "c1", "c2")
	w.copies = []listed{{op: appOp, kind: "Secret", clusters: []string{"c1", "c2"}}}
	for _, c := range []string{"c1", "c2"} {
		w.grant(c, fallbackUser, "create secrets apps", "update secrets apps")
	}
	w.pass("c1", "1")
	w.pass("c1", "2")
	w.pass("c2", "2")
	w.pass("c2", "3")
	w.take()

	w.clusters[fleetNS+"/c1"] = w.client("c1") // the downstream cache rebuilt c1's client
	w.pass("c1", "4")
	// Positive control: c1 builds a new client (#3), looks the fallback
	// ServiceAccount up again and asks again for "update", which its old
	// client had been allowed.
	w.expect("c1 after its client was rebuilt", []string{"c1#3 fleet-default update secrets apps"}, []string{"c1#3 fleet-default update secrets apps"})
	if n := w.saLookups("c1"); n != 2 {
		t.Errorf("fallback ServiceAccount lookups in c1 after its client was rebuilt = %d, want 2", n)
	}
	w.pass("c2", "5")
	// c2 keeps its client (#2), its fallback answer and its allowed "update".
	w.expect("c2 after c1's client was rebuilt", nil, []string{"c2#2 fleet-default update secrets apps"})
	if n := w.saLookups("c2"); n != 1 {
		t.Errorf("fallback ServiceAccount lookups in c2 = %d, want 1", n)
	}
	w.pass("c1", "6")
	// c1 writes through its new client, never the one of its old client,
	// and reuses the answer that client was given.
	w.expect("c1 again", nil, []string{"c1#3 fleet-default update secrets apps"})
	if w.builds != 3 {
		t.Errorf("impersonating clients built = %d, want 3", w.builds)
	}
}

// A Cluster that is deleted loses what was kept for it: were it created
// again with the same name, and even the same client, its identities are
// looked up, built and asked anew. Other clusters keep theirs.
func TestForgottenClusterDropsItsIdentities(t *testing.T) {
	w := newIdentityWorld(t, "c1", "c2")
	w.copies = []listed{{op: appOp, kind: "Secret", clusters: []string{"c1", "c2"}}}
	for _, c := range []string{"c1", "c2"} {
		w.grant(c, fallbackUser, "create secrets apps", "update secrets apps")
	}
	w.pass("c1", "1")
	w.pass("c1", "2")
	w.pass("c2", "2")
	w.pass("c2", "3")
	w.take()

	c1, _, _ := w.lister.GetByKey(fleetNS + "/c1")
	_ = w.lister.Delete(c1)
	if err := w.env.e.reconcileCluster(w.env.ctx, fleetNS+"/c1"); err != nil {
		t.Fatal(err)
	}
	_ = w.lister.Add(c1) // the same Cluster again; clusterSet hands out the same client

	w.pass("c1", "4")
	w.expect("c1 created again", []string{"c1#3 fleet-default update secrets apps"}, []string{"c1#3 fleet-default update secrets apps"})
	if n := w.saLookups("c1"); n != 2 {
		t.Errorf("fallback ServiceAccount lookups in c1 = %d, want 2", n)
	}
	w.pass("c2", "5")
	w.expect("c2", nil, []string{"c2#2 fleet-default update secrets apps"})
	if n := w.saLookups("c2"); n != 1 {
		t.Errorf("fallback ServiceAccount lookups in c2 = %d, want 1", n)
	}
}

// Access reviews: an "allowed" answer is reused for accessTTL, then asked
// again; a denial is asked again on every retry, so a right granted later
// is noticed at the next one; a write the cluster refuses drops the
// identity's cached answers, and only that identity's.
func TestAccessAnswers(t *testing.T) {
	w := newIdentityWorld(t, "c1", "c2")
	deployer := "cattle-fleet-system/deployer"
	w.copies = []listed{
		{op: appOp, kind: "Secret", sa: deployer, clusters: []string{"c1", "c2"}},
		{op: otherOp, kind: "ConfigMap", sa: "cattle-fleet-system/helper", clusters: []string{"c1"}},
	}
	w.grant("c1", deployerUser, "create secrets apps", "update secrets apps")
	w.grant("c2", deployerUser, "create secrets apps", "update secrets apps")
	w.grant("c1", helperUser, "create configmaps apps", "update configmaps apps")
	t0 := w.now

	w.pass("c1", "1")
	w.expect("c1 create", []string{"c1#1 deployer create secrets apps", "c1#2 helper create configmaps apps"},
		[]string{"c1#1 deployer create secrets apps", "c1#2 helper create configmaps apps"})
	w.pass("c1", "2")
	w.expect("c1 first update", []string{"c1#1 deployer update secrets apps", "c1#2 helper update configmaps apps"},
		[]string{"c1#1 deployer update secrets apps", "c1#2 helper update configmaps apps"})
	w.now = t0.Add(accessTTL - time.Second)
	w.pass("c1", "3")
	w.expect("c1 update within the TTL", nil,
		[]string{"c1#1 deployer update secrets apps", "c1#2 helper update configmaps apps"})
	w.now = t0.Add(accessTTL + time.Second)
	w.pass("c1", "4")
	w.expect("c1 update after the TTL", []string{"c1#1 deployer update secrets apps", "c1#2 helper update configmaps apps"},
		[]string{"c1#1 deployer update secrets apps", "c1#2 helper update configmaps apps"})
	w.pass("c2", "4")
	w.pass("c2", "5")
	w.expect("c2 create and update", []string{"c2#3 deployer create secrets apps", "c2#3 deployer update secrets apps"},
		[]string{"c2#3 deployer create secrets apps", "c2#3 deployer update secrets apps"})

	// The deployer loses "update" in c1. Its cached answer says allowed:
	// the write is tried, refused, and the cached answers are dropped.
	w.grant("c1", deployerUser, "create secrets apps")
	w.pass("c1", "5")
	w.expect("c1 update refused", nil,
		[]string{"c1#1 deployer update secrets apps (refused)", "c1#2 helper update configmaps apps"})
	if st := w.status(appOp, "c1", "Secret"); st != courier.CopyPhaseForbidden {
		t.Errorf("c1 Secret after the refused update: phase %s, want Forbidden", st)
	}
	// The retry asks the deployer again, and writes nothing; the helper's
	// answer in c1 and the deployer's in c2 are still reused.
	w.pass("c1", "6")
	w.expect("c1 retry", []string{"c1#1 deployer update secrets apps"}, []string{"c1#2 helper update configmaps apps"})
	if st := w.status(appOp, "c1", "Secret"); st != courier.CopyPhaseForbidden {
		t.Errorf("c1 Secret after the denial: phase %s, want Forbidden", st)
	}
	w.pass("c2", "6")
	w.expect("c2 after c1's refusal", nil, []string{"c2#3 deployer update secrets apps"})
	// A denial is not remembered: every retry asks again.
	w.pass("c1", "6")
	w.expect("c1 second retry", []string{"c1#1 deployer update secrets apps"}, nil)
	// Granted again: the next retry notices, writes, and the answer is
	// reused from then on.
	w.grant("c1", deployerUser, "create secrets apps", "update secrets apps")
	w.pass("c1", "6")
	w.expect("c1 retry once granted", []string{"c1#1 deployer update secrets apps"}, []string{"c1#1 deployer update secrets apps"})
	if st := w.status(appOp, "c1", "Secret"); st != courier.CopyPhaseSynced {
		t.Errorf("c1 Secret once granted: phase %s, want Synced", st)
	}
	w.pass("c1", "7")
	w.expect("c1 next update", nil, []string{"c1#1 deployer update secrets apps", "c1#2 helper update configmaps apps"})
}

// Several workers reconcile different clusters at once and share the
// caches (run with -race): each cluster still builds one client and asks
// each access once per refusal, however the others interleave.
func TestIdentityCachesAcrossWorkers(t *testing.T) {
	env := newEnv(t, nil)
	const clusters, rounds = 8, 20
	var mu sync.Mutex
	built := map[string][]*fake.Clientset{} // by host
	env.e.impersonate.newClient = func(cfg *rest.Config) (writeClient, error) {
		cs := fake.NewClientset()
		cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
			r.Status.Allowed = true
			return true, r, nil
		})
		mu.Lock()
		built[cfg.Host] = append(built[cfg.Host], cs)
		mu.Unlock()
		return cs, nil
	}
	fallbackSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-fleet-system", Name: FallbackServiceAccount}}
	need := []access{{verb: "update", resource: "secrets", namespace: targetNS}}
	var wg sync.WaitGroup
	for n := range clusters {
		down := newFakeCluster(true, fallbackSA)
		cl := down.client()
		cl.Key = fmt.Sprintf("%s/c%d", fleetNS, n)
		cl.Config = &rest.Config{Host: fmt.Sprintf("https://c%d.example", n)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				id, _, err := env.e.resolveIdentity(env.ctx, cl, "", env.e.fallbackLookup(env.ctx, cl))
				if err != nil {
					t.Error(err)
					return
				}
				if denied, err := env.e.checkAccess(env.ctx, id, need); err != nil || denied != "" {
					t.Errorf("%s: checkAccess = %q, %v", cl.Key, denied, err)
				}
				if r%5 == 4 {
					id.refused()
				}
			}
		}()
	}
	wg.Wait()
	if len(built) != clusters {
		t.Errorf("clusters with an impersonating client = %d, want %d", len(built), clusters)
	}
	for host, cs := range built {
		if len(cs) != 1 {
			t.Errorf("%s: %d impersonating clients built, want 1", host, len(cs))
			continue
		}
		// Asked in rounds 0, 5, 10 and 15: after each refusal, once.
		if n := len(cs[0].Actions()); n != rounds/5 {
			t.Errorf("%s: %d access reviews, want %d", host, n, rounds/5)
		}
	}
}
