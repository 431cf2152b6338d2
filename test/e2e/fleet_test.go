package e2e

// Fleet as it really runs (docs/design.md#rules-of-behaviour): Clusters that share a kube-apiserver,
// kubeconfig Secrets in other namespaces, Fleet's own copies, names with
// dots, and an upstream kube-apiserver that restarts.

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyview"
	"github.com/courier-dev/courier/pkg/exportpolicy"
)

// addCluster adds a Cluster named name to the workspace whose kubeconfig
// Secret reaches downstream cluster i and lives in namespace secretNS (the
// workspace when empty; created if missing).
func (w *workspace) addCluster(name string, i int, secretNS string) {
	w.t.Helper()
	ctx := context.Background()
	kubeconfig, err := os.ReadFile(env.Downstreams[i].Kubeconfig)
	if err != nil {
		w.t.Fatal(err)
	}
	ns := secretNS
	if ns == "" {
		ns = w.ns
	}
	if _, err := w.c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	secretName := w.ns + "-" + name + "-kubeconfig"
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns}, Data: map[string][]byte{"value": kubeconfig}}
	if _, err := w.c.kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = w.c.kube.CoreV1().Secrets(ns).Delete(context.Background(), secretName, metav1.DeleteOptions{})
	})
	w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fleet.ClusterSpec{KubeConfigSecret: secretName, KubeConfigSecretNamespace: secretNS}})
}

// writesTo returns Courier's writes to downstream cluster i that concern
// namespace ns (the objects in it, and the namespace itself).
func writesTo(t *testing.T, i int, ns string) []string {
	t.Helper()
	return auditWritesTo(t, i, ns, false)
}

// acceptedWritesTo is writesTo for the writes the kube-apiserver carried
// out.
func acceptedWritesTo(t *testing.T, i int, ns string) []string {
	t.Helper()
	return auditWritesTo(t, i, ns, true)
}

func auditWritesTo(t *testing.T, i int, ns string, accepted bool) []string {
	t.Helper()
	var out []string
	for _, wr := range courierAuditWrites(t, i, accepted) {
		wr = strings.SplitN(wr, " as ", 2)[0]
		if strings.Contains(wr, " "+ns+"/") || strings.HasSuffix(wr, "namespaces /"+ns) {
			out = append(out, wr)
		}
	}
	return out
}

// TestTwinClustersOnOneAPIServer: two Fleet Clusters reach one
// kube-apiserver and want one copy (docs/design.md#clusters-sharing-a-kube-apiserver). It is written once,
// both rows are Synced, nothing is written while nothing changes, and a
// source change is written once, not once per Cluster.
func TestTwinClustersOnOneAPIServer(t *testing.T) {
	w := newWorkspace(t, "ws-twins")
	w.addCluster("c1", 0, "")
	w.addCluster("c1-twin", 0, "")
	dest := "twins-dest"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "1"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")},
		fleet.BundleTarget{ClusterName: "c1"}, fleet.BundleTarget{ClusterName: "c1-twin"}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced", "c1-twin/Secret/s@"+dest+"=Synced")
	waitSecret(t, 0, dest, "s", 10*time.Second, "copied", secretData("k", "1"))

	// Settled: the positive control is the create already in the audit log.
	settled, settledDone := writesTo(t, 0, dest), acceptedWritesTo(t, 0, dest)
	if !slices.Contains(settled, "create secrets "+dest+"/s") {
		t.Fatalf("the audit log shows no create of the copy: %q", settled)
	}
	if n := strings.Count(strings.Join(settled, "\n"), "secrets "+dest+"/s"); n > 2 {
		// One create, and at most one update racing it from the twin.
		t.Errorf("settling took %d writes of the copy: %q", n, settled)
	}
	stays(t, 15*time.Second, "no write from Courier while nothing changes", func() bool {
		return len(writesTo(t, 0, dest)) == len(settled)
	})
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced", "c1-twin/Secret/s@"+dest+"=Synced")

	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "2"}})
	waitSecret(t, 0, dest, "s", 10*time.Second, "change copied", secretData("k", "2"))
	src, err := w.c.kube.CoreV1().Secrets(w.ns).Get(context.Background(), "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both rows Synced at the new source version", func() (bool, string) {
		list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, r := range list.Items {
			if r.Status.Phase == "Synced" && r.Status.SyncedResourceVersion == src.ResourceVersion {
				n++
			}
		}
		return n == 2, w.messages()
	})
	// Both Clusters are queued by the change; the one that reads the copy
	// before the other's write lands tries too, and is refused with a 409
	// (then finds it current). Carried out: one update.
	tried := writesTo(t, 0, dest)[len(settled):]
	done := acceptedWritesTo(t, 0, dest)[len(settledDone):]
	if len(done) != 1 || done[0] != "update secrets "+dest+"/s" || len(tried) > 2 {
		t.Errorf("one source change: tried %q, carried out %q; want one update carried out, at most one more refused", tried, done)
	}
}

// TestKubeconfigSecretNamespaces: a kubeconfig Secret is read from the
// namespaces docs/design.md#inputs allows, and from no other; the refused Cluster gets
// nothing written and its row says which namespace and why.
func TestKubeconfigSecretNamespaces(t *testing.T) {
	w := newWorkspace(t, "ws-kcns")
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}})
	allowed := map[string]string{ // Cluster -> kubeconfig Secret namespace
		"own": "", "local": "fleet-local", "default": "fleet-default", "system": "cattle-fleet-system",
		"clusters": "cattle-fleet-clusters-system", "prefixed": "cluster-kcns",
	}
	var targets []fleet.BundleTarget
	var want []string
	i := 0
	for name, ns := range allowed {
		w.addCluster(name, i%2, ns)
		targets = append(targets, fleet.BundleTarget{ClusterName: name, BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "kcns-" + name}})
		want = append(want, name+"/ConfigMap/cm@kcns-"+name+"=Synced")
		i++
	}
	w.addCluster("refused", 0, "kcns-other-tenant")
	targets = append(targets, fleet.BundleTarget{ClusterName: "refused", BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "kcns-refused"}})
	want = append(want, "refused/ConfigMap/cm@kcns-refused=Unreachable")
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: resources("ConfigMap/cm")}, targets...))
	w.waitRows(metav1.ListOptions{}, want...)

	row, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).Get(context.Background(), copyview.RowName("app", "refused", "ConfigMap", "cm"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`"kcns-other-tenant" is not allowed`, "fleet-default", "cluster-"} {
		if !strings.Contains(row.Status.Message, part) {
			t.Errorf("the refused row's message %q does not say %q", row.Status.Message, part)
		}
	}
	// The allowed Clusters' copies exist (positive control); the refused
	// one's destination was never created.
	for name := range allowed {
		if len(writesTo(t, 0, "kcns-"+name))+len(writesTo(t, 1, "kcns-"+name)) == 0 {
			t.Errorf("no write for Cluster %s", name)
		}
	}
	if wr := writesTo(t, 0, "kcns-refused"); len(wr) != 0 {
		t.Errorf("writes for the refused Cluster: %q", wr)
	}
}

// TestFleetsOwnCopies: an object Fleet's agent copied (label
// fleet.cattle.io/bundledeployment) is reported, never written or deleted
// (docs/design.md#fleets-own-copies).
func TestFleetsOwnCopies(t *testing.T) {
	w := newWorkspace(t, "ws-fleets-copies", nil)
	dest := "fleets-copies-dest"
	ctx := context.Background()
	d := downstream(t, 0)
	if _, err := d.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fleets, err := d.CoreV1().Secrets(dest).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"fleet.cattle.io/bundledeployment": "app-c1"}},
		Data:       map[string][]byte{"k": []byte("v")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s", "ConfigMap/cm")},
		fleet.BundleTarget{ClusterName: "c1"}))
	w.waitRows(metav1.ListOptions{}, "c1/ConfigMap/cm@"+dest+"=Synced", "c1/Secret/s@"+dest+"=Synced")
	row, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).Get(ctx, copyview.RowName("app", "c1", "Secret", "s"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row.Status.Message, "BundleDeployment app-c1") {
		t.Errorf("row message %q does not name Fleet's BundleDeployment", row.Status.Message)
	}
	// Positive control: the ConfigMap beside it was written.
	if wr := writesTo(t, 0, dest); !slices.Contains(wr, "create configmaps "+dest+"/cm") || slices.Contains(wr, "update secrets "+dest+"/s") {
		t.Errorf("writes %q: want the ConfigMap created and Fleet's Secret untouched", wr)
	}

	// Fleet's copy changes downstream: Conflict, still no write.
	fleets.Data = map[string][]byte{"k": []byte("changed by someone")}
	if fleets, err = d.CoreV1().Secrets(dest).Update(ctx, fleets, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitRows(metav1.ListOptions{}, "c1/ConfigMap/cm@"+dest+"=Synced", "c1/Secret/s@"+dest+"=Conflict")
	// The HelmOp goes: its ConfigMap copy is removed (positive control),
	// Fleet's Secret stays as it was.
	if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigMap(t, 0, dest, "cm", 10*time.Second, "Courier's copy removed", func(c *corev1.ConfigMap) bool { return c == nil })
	got, err := d.CoreV1().Secrets(dest).Get(ctx, "s", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != fleets.ResourceVersion {
		t.Errorf("Fleet's copy was touched: %v (resourceVersion %q, was %q)", err, got.GetResourceVersion(), fleets.ResourceVersion)
	}
	for _, wr := range writesTo(t, 0, dest) {
		if strings.Contains(wr, "secrets "+dest+"/s") {
			t.Errorf("Courier wrote Fleet's copy: %q", wr)
		}
	}
}

// TestSourceCarryingFleetsLabel: the labels that decide who owns a copy
// are never taken from a source (docs/design.md#fleets-own-copies). A
// source labelled fleet.cattle.io/bundledeployment (Fleet's local agent
// wrote it, or a user did) is copied without that label, kept in step when
// it changes, and removed when its owner goes.
func TestSourceCarryingFleetsLabel(t *testing.T) {
	w := newWorkspace(t, "ws-fleet-label", nil)
	dest := "fleet-label-dest"
	ctx := context.Background()
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"fleet.cattle.io/bundledeployment": "local-app"}},
		StringData: map[string]string{"k": "v1"}}
	w.apply(src)
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")},
		fleet.BundleTarget{ClusterName: "c1"}))
	waitSecret(t, 0, dest, "s", 20*time.Second, "the copy", secretData("k", "v1"))
	got, err := downstream(t, 0).CoreV1().Secrets(dest).Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Labels["fleet.cattle.io/bundledeployment"]; ok || got.Labels["courier.dev/managed-by"] != "courier" {
		t.Errorf("the copy's labels %v: want Courier's and not Fleet's copy label", got.Labels)
	}
	src.StringData = map[string]string{"k": "v2"}
	w.apply(src)
	waitSecret(t, 0, dest, "s", 20*time.Second, "the copy kept in step", secretData("k", "v2"))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced")
	if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, 0, dest, "s", 20*time.Second, "the copy removed with its owner", absentSecret)
}

// TestRowNamesWithDots: HelmOp a.b on Cluster c and HelmOp a on Cluster b.c
// are two rows with two names, and both copies are made (docs/design.md#the-downstreamcopy-view).
func TestRowNamesWithDots(t *testing.T) {
	w := newWorkspace(t, "ws-dots")
	w.addCluster("c", 0, "")
	w.addCluster("b.c", 1, "")
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("a.b", fleet.BundleDeploymentOptions{TargetNamespace: "dots-ab", DownstreamResources: resources("Secret/s")}, fleet.BundleTarget{ClusterName: "c"}))
	w.apply(helmOp("a", fleet.BundleDeploymentOptions{TargetNamespace: "dots-a", DownstreamResources: resources("Secret/s")}, fleet.BundleTarget{ClusterName: "b.c"}))
	w.waitRows(metav1.ListOptions{}, "b.c/Secret/s@dots-a=Synced", "c/Secret/s@dots-ab=Synced")
	waitSecret(t, 0, "dots-ab", "s", 10*time.Second, "HelmOp a.b's copy", secretData("k", "v"))
	waitSecret(t, 1, "dots-a", "s", 10*time.Second, "HelmOp a's copy", secretData("k", "v"))
	out := kubectl(t, "get", "dcp", "-n", w.ns, "-o", "name")
	names := strings.Fields(out)
	if len(names) != 2 || names[0] == names[1] {
		t.Errorf("kubectl get dcp -o name: %q, want two different names", names)
	}
}

// TestUpstreamRestart: the upstream kube-apiserver stops for 10 s and
// starts again; Courier, not restarted, answers again and copies a change
// to both clusters.
func TestUpstreamRestart(t *testing.T) {
	w := newWorkspace(t, "ws-upstream-restart", nil, nil)
	w.apply(selectAll("default"))
	dest := "upstream-restart-dest"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "1"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced", "c2/Secret/s@"+dest+"=Synced")
	pid := courier.Pid()

	env.Upstream.Stop()
	started := false
	t.Cleanup(func() {
		if !started {
			_ = env.Upstream.Start(context.Background())
		}
	})
	time.Sleep(10 * time.Second) // the fault: the upstream is down this long
	if err := env.Upstream.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	started = true
	eventually(t, "kubectl get dcp answers again", func() (bool, string) {
		out, err := env.Kubectl(context.Background(), env.Upstream, "get", "dcp", "-n", w.ns, "--no-headers")
		return err == nil && strings.Count(out, "Synced") == 2, out
	})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "2"}})
	// Courier's upstream informers learn of the change when their
	// reflectors reconnect. Client-go's reflector backs off exponentially
	// from 0.8 s while the upstream is down, with a jitter of up to 100 %,
	// so after a 10 s outage its next attempt can come ~25 s after the
	// server is back (and never more than 60 s: the backoff is capped at
	// 30 s before jitter). Copies then land within seconds.
	const reconnect = 75 * time.Second
	waitSecret(t, 0, dest, "s", reconnect, "change copied to downstream-1", secretData("k", "2"))
	waitSecret(t, 1, dest, "s", reconnect, "change copied to downstream-2", secretData("k", "2"))
	if courier.Pid() != pid {
		t.Errorf("Courier was restarted (pid %d, was %d)", courier.Pid(), pid)
	}
}

// TestFleetCopyOfDeniedSource: a source that may never be exported, of
// which Fleet's own agent made a copy downstream, is Denied; Courier
// leaves Fleet's object alone, and the row and a Warning Event on the
// owner say Fleet exported it, naming the Cluster
// (docs/design.md#export-safety).
func TestFleetCopyOfDeniedSource(t *testing.T) {
	w := newWorkspace(t, "ws-fleet-denied", nil)
	dest := "fleet-denied-dest"
	ctx := context.Background()
	d := downstream(t, 0)
	if _, err := d.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fleets, err := d.CoreV1().Secrets(dest).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "private", Labels: map[string]string{"fleet.cattle.io/bundledeployment": "app-c1"}},
		Data:       map[string][]byte{"k": []byte("v")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "private", Annotations: map[string]string{exportpolicy.AnnotationExport: "false"}},
		StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-private", Annotations: map[string]string{exportpolicy.AnnotationExport: "false"}},
		StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/private", "Secret/other-private", "ConfigMap/cm")},
		fleet.BundleTarget{ClusterName: "c1"}))
	w.waitRows(metav1.ListOptions{}, "c1/ConfigMap/cm@"+dest+"=Synced", "c1/Secret/other-private@"+dest+"=Denied", "c1/Secret/private@"+dest+"=Denied")

	messages := func() map[string]string {
		list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range list.Items {
			out[r.Spec.Source.Name] = r.Status.Message
		}
		return out
	}
	eventually(t, "the Denied row says Fleet exported it", func() (bool, string) {
		m := messages()["private"]
		return strings.Contains(m, `annotated courier.dev/export: "false"`) && strings.Contains(m, "Fleet's own agent exported it") &&
			strings.Contains(m, "in cluster c1") && strings.Contains(m, "BundleDeployment app-c1"), m
	})
	// The positive control's neighbour: the Denied row with no Fleet copy
	// says nothing of Fleet.
	if m := messages()["other-private"]; strings.Contains(m, "Fleet") || !strings.Contains(m, "never exported") {
		t.Errorf("row other-private: message %q", m)
	}
	warningSays(t, w, "ExportedByFleet", "app", "Secret "+dest+"/private in cluster c1 is Fleet's copy")
	// Fleet's object is as Fleet left it, and Courier wrote only the
	// ConfigMap (the positive control).
	got, err := d.CoreV1().Secrets(dest).Get(ctx, "private", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != fleets.ResourceVersion {
		t.Errorf("Fleet's copy was touched: %v (resourceVersion %q, was %q)", err, got.GetResourceVersion(), fleets.ResourceVersion)
	}
	if wr := writesTo(t, 0, dest); !slices.Contains(wr, "create configmaps "+dest+"/cm") || slices.ContainsFunc(wr, func(s string) bool { return strings.Contains(s, "secrets") }) {
		t.Errorf("writes %q: want the ConfigMap created and no Secret written", wr)
	}

	// Fleet's copy gone: the row no longer says it is there.
	if err := d.CoreV1().Secrets(dest).Delete(ctx, "private", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Denied row no longer names Fleet's copy", func() (bool, string) {
		m := messages()["private"]
		return strings.Contains(m, "never exported") && !strings.Contains(m, "Fleet"), m
	})
}
