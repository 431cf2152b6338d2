package engine

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copyspec"
)

const c2Key = fleetNS + "/c2"

// reconcileKey reconciles one Cluster and fails the test on an error.
func (env *testEnv) reconcileKey(key string) {
	env.t.Helper()
	drain(env.e.queue)
	if err := env.e.reconcileCluster(env.ctx, key); err != nil {
		env.t.Fatalf("reconcile %s: %v", key, err)
	}
}

// takeWrites returns the downstream writes since the last call.
func (env *testEnv) takeWrites() []string {
	w := actionStrings(writes(env.down.kube.Actions()))
	env.down.kube.ClearActions()
	return w
}

// Clusters c1 and c2 reach one kube-apiserver (the fake hands both the same
// client) and want the same copy (docs/design.md#clusters-sharing-a-kube-apiserver): it is written once,
// each finds it current afterwards, and a source change is written once.
func TestTwinClustersShareOneCopy(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	env := newEnv(t, down, srcSecret("db", "7"))
	r1, r2 := row("Secret", "db", "7", courier.CopyPhasePending), rowFor(appOp.Name, "c2", "Secret", "db", "7", courier.CopyPhasePending)
	env.setDesired(r1, r2)

	env.reconcileKey(clusterKey)
	// Courier's own identity makes the namespace without reading it first
	// (it exists: AlreadyExists), then the copy.
	if w := env.takeWrites(); len(w) != 2 || w[1] != "create secrets apps/db" {
		t.Fatalf("c1's first pass wrote %q, want the namespace and one create", w)
	}
	env.reconcileKey(c2Key)
	env.reconcileKey(clusterKey)
	env.reconcileKey(c2Key)
	if w := env.takeWrites(); len(w) != 0 {
		t.Errorf("passes over a current copy wrote %q, want nothing", w)
	}
	for _, r := range []*courier.DownstreamCopy{r1, r2} {
		if st := env.mustStatus(r); st.Phase != courier.CopyPhaseSynced {
			t.Errorf("row %s: %s %q, want Synced", r.Name, st.Phase, st.Message)
		}
	}

	// The source changes; c2 happens to pass first. It updates the content
	// and keeps the copy naming c1; c1 then finds it current.
	changed := srcSecret("db", "8")
	changed.Data["password"] = []byte(canary + "-2")
	if _, err := env.upstream.CoreV1().Secrets(fleetNS).Update(context.Background(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r1, r2 = row("Secret", "db", "8", courier.CopyPhasePending), rowFor(appOp.Name, "c2", "Secret", "db", "8", courier.CopyPhasePending)
	env.setDesired(r1, r2)
	env.reconcileKey(c2Key)
	env.reconcileKey(clusterKey)
	if w := env.takeWrites(); len(w) != 1 || w[0] != "update secrets apps/db" {
		t.Fatalf("one source change wrote %q, want one update", w)
	}
	got, _ := down.secret(targetNS, "db")
	if got.Labels[copyspec.LabelClusterHash] != c1ClusterHash {
		t.Errorf("the update renamed the copy: cluster hash %q; want c1's", got.Labels[copyspec.LabelClusterHash])
	}
	if string(got.Data["password"]) != canary+"-2" {
		t.Error("the update did not carry the source's new data")
	}
}

// A copy c1 no longer wants stays while its twin c2, on the same
// kube-apiserver, still wants it; once nobody wants it, c1 removes it.
func TestSweepLeavesTwinsCopy(t *testing.T) {
	src := srcSecret("db", "7")
	copyForC1 := secretCopy(src, targetNS, owner(appOp, "c1"))
	down := newFakeCluster(true, targetNamespace, copyForC1)
	env := newEnv(t, down, src)
	r2 := rowFor(appOp.Name, "c2", "Secret", "db", "7", courier.CopyPhasePending)

	env.setDesired(r2)
	env.reconcileKey(c2Key) // c2 finds it current and records its server
	env.reconcileKey(clusterKey)
	if w := env.takeWrites(); len(w) != 0 {
		t.Errorf("c1's sweep wrote %q while c2 still wants the copy", w)
	}
	if st := env.mustStatus(r2); st.Phase != courier.CopyPhaseSynced {
		t.Errorf("c2's row: %s %q, want Synced", st.Phase, st.Message)
	}
	if left := env.leftovers(); len(left) != 0 {
		t.Errorf("leftovers %+v: a copy a twin wants is no leftover", left)
	}

	// Positive control: nobody wants it any more.
	env.setDesired()
	env.reconcileKey(clusterKey)
	if w := env.takeWrites(); len(w) != 1 || w[0] != "delete secrets apps/db" {
		t.Errorf("c1's sweep wrote %q once nobody wants the copy, want one delete", w)
	}
}

// Fleet's agent copies downstreamResources itself (docs/design.md#fleets-own-copies):
// Courier reports such a copy and never writes or deletes it.
func TestFleetsCopy(t *testing.T) {
	src := srcSecret("db", "7")
	fleets := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: targetNS, Name: "db", UID: "fleets", ResourceVersion: "40",
			Labels: map[string]string{copyspec.FleetCopyLabel: "app-c1"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte(canary)},
	}
	down := newFakeCluster(true, targetNamespace, fleets)
	env := newEnv(t, down, src)
	r := row("Secret", "db", "7", courier.CopyPhasePending)

	if err := env.reconcile(r); err != nil {
		t.Fatal(err)
	}
	st := env.mustStatus(r)
	if st.Phase != courier.CopyPhaseSynced || !strings.Contains(st.Message, "Fleet's copy (BundleDeployment app-c1)") {
		t.Errorf("equal Fleet copy: %s %q, want Synced naming the BundleDeployment", st.Phase, st.Message)
	}
	if w := env.takeWrites(); len(w) != 0 {
		t.Errorf("wrote %q over Fleet's equal copy", w)
	}

	edited := fleets.DeepCopy()
	edited.Data["password"] = []byte("changed downstream")
	if err := down.kube.Tracker().Update(secretsGVR, edited, targetNS); err != nil {
		t.Fatal(err)
	}
	if err := env.reconcile(r); err != nil {
		t.Fatal(err)
	}
	st = env.mustStatus(r)
	if st.Phase != courier.CopyPhaseConflict || !strings.Contains(st.Message, "differs from its source") {
		t.Errorf("differing Fleet copy: %s %q, want Conflict saying it differs", st.Phase, st.Message)
	}
	if w := env.takeWrites(); len(w) != 0 {
		t.Errorf("wrote %q over Fleet's differing copy", w)
	}

	// The HelmOp is deleted: Fleet's copy stays.
	if err := env.reconcile(); err != nil {
		t.Fatal(err)
	}
	if w := env.takeWrites(); len(w) != 0 {
		t.Errorf("the sweep wrote %q: Fleet's copy must stay", w)
	}
	if _, ok := down.secret(targetNS, "db"); !ok {
		t.Error("Fleet's copy is gone")
	}
}

// The labels that decide who owns a copy are never taken from a source
// (docs/design.md#fleets-own-copies). A copy of Courier's that carries
// Fleet's label, taken from its source before that rule, is Courier's:
// kept in step (the write drops Fleet's label) and removed when nothing
// wants it. Fleet's agent never puts Courier's managed-by label on its
// copies (TestFleetsCopy).
func TestCourierCopyCarryingFleetsLabel(t *testing.T) {
	old := srcSecret("db", "6")
	old.Labels[copyspec.FleetCopyLabel] = "app-c1"
	mislabelled := secretCopy(old, targetNS, owner(appOp, "c1"), func(s *corev1.Secret) {
		s.Labels[copyspec.FleetCopyLabel] = "app-c1"
	})
	down := newFakeCluster(true, targetNamespace, mislabelled)
	src := srcSecret("db", "7") // changed since; it still carries Fleet's label
	src.Labels[copyspec.FleetCopyLabel] = "app-c1"
	src.Data["password"] = []byte(canary + "-v2")
	env := newEnv(t, down, src)
	r := row("Secret", "db", "7", courier.CopyPhasePending)

	if err := env.reconcile(r); err != nil {
		t.Fatal(err)
	}
	if st := env.mustStatus(r); st.Phase != courier.CopyPhaseSynced || strings.Contains(st.Message, "Fleet") {
		t.Errorf("status %s %q, want Synced as Courier's own copy", st.Phase, st.Message)
	}
	got, _ := down.secret(targetNS, "db")
	if string(got.Data["password"]) != canary+"-v2" {
		t.Error("the copy was not kept in step with its source")
	}
	if _, ok := got.Labels[copyspec.FleetCopyLabel]; ok {
		t.Errorf("the copy still carries Fleet's label: %v", got.Labels)
	}
	down.cache(got)

	env.setDesired() // the owner goes
	env.reconcileKey(clusterKey)
	if _, ok := down.secret(targetNS, "db"); ok {
		t.Error("the copy outlived its owner")
	}
}

// Copies written before the cluster-hash label existed are not in the
// informer's selection: the first sweep with a client lists them live,
// removes the unwanted ones and leaves the wanted ones to be relabelled;
// later sweeps do not list again.
func TestLegacySweep(t *testing.T) {
	unlabel := func(s *corev1.Secret) { // as written then: the Cluster named by an annotation
		delete(s.Labels, copyspec.LabelClusterHash)
		s.Annotations[copyspec.LegacyAnnotationCluster] = "c1"
	}
	db, old := srcSecret("db", "7"), srcSecret("old", "3")
	down := newFakeCluster(true, targetNamespace,
		secretCopy(db, targetNS, owner(appOp, "c1"), unlabel),
		secretCopy(old, targetNS, owner(appOp, "c1"), unlabel))
	// The informer selects by the label: it holds neither.
	for _, name := range []string{"db", "old"} {
		_ = down.secrets.Delete(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: targetNS, Name: name}})
	}
	env := newEnv(t, down, db, old)
	env.e.clients.forget(clusterKey)

	if err := env.reconcile(row("Secret", "db", "7", courier.CopyPhasePending)); err != nil {
		t.Fatal(err)
	}
	legacyList := "list secrets !courier.dev/cluster-hash,courier.dev/managed-by=courier"
	checkContains(t, env.downActions(), legacyList, "delete secrets apps/old", "update secrets apps/db")
	got, _ := down.secret(targetNS, "db")
	if got.Labels[copyspec.LabelClusterHash] != c1ClusterHash {
		t.Errorf("the wanted copy was not relabelled: %v", got.Labels)
	}
	env.down.kube.ClearActions()
	if err := env.reconcile(row("Secret", "db", "7", courier.CopyPhasePending)); err != nil {
		t.Fatal(err)
	}
	for _, a := range env.downActions() {
		if a == legacyList {
			t.Errorf("the second sweep listed unlabelled copies again: %q", env.downActions())
		}
	}
}

func checkContains(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("requests %q lack %q", got, w)
		}
	}
}
