package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/copyview"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/test/localenv"
)

// TestPullCopies is pull delivery (docs/design.md#pull-delivery) end to end: a
// courier-agent process for downstream-2, whose Fleet Cluster has no
// kubeconfig Secret, gets everything a pushed cluster gets, by the same
// rules. Each step waits on what it checks; a check that something does
// not happen waits first for something that does.
func TestPullCopies(t *testing.T) {
	const user = "courier-agent-pull"
	w := pullWorkspace(t, "ws-pull", user)
	dest := "pull-dest"
	canary := "pull-canary-" + randomHex(t)
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: map[string]string{"app": "web"}},
		Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"username": []byte("app"), "password": []byte(canary)}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "pulled"}})
	app := helmOp("app", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: resources("Secret/db", "ConfigMap/settings")})
	w.apply(app)
	agent := startAgent(t, w, user, "--report-interval=2s")

	t.Run("copies with type and data", func(t *testing.T) {
		waitSecret(t, pulled, dest, "db", 30*time.Second, "copied", func(s *corev1.Secret) bool {
			return s != nil && s.Type == corev1.SecretTypeBasicAuth && string(s.Data["password"]) == canary && s.Labels["app"] == "web" &&
				s.Labels[copyspec.LabelManagedBy] == copyspec.ManagedByValue && s.Annotations[copyspec.AnnotationHelmOp] == w.ns+"/app"
		})
		waitConfigMap(t, pulled, dest, "settings", 10*time.Second, "copied", configMapData("mode", "pulled"))
	})
	t.Run("a source change and a new key within 10 s", func(t *testing.T) {
		w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "changed", "new": "key"}})
		waitConfigMap(t, pulled, dest, "settings", 10*time.Second, "changed with the new key", func(cm *corev1.ConfigMap) bool {
			return cm != nil && cm.Data["mode"] == "changed" && cm.Data["new"] == "key"
		})
	})
	t.Run("the agent's watch is served by pkg/agentwatch", pullWatchServed)
	t.Run("drift repaired", func(t *testing.T) { pullDrift(t, dest, canary) })
	// Before the Conflict below: an object Courier may not own is tried
	// again on every pass, so with one nothing is "everything current".
	t.Run("a restart with everything current writes nothing", func(t *testing.T) { pullRestart(t, agent, 2) })
	t.Run("an unowned object is a Conflict and untouched", func(t *testing.T) { pullConflict(t, w, agent, app, dest) })
	t.Run("an entry removed is pruned", func(t *testing.T) {
		app.Spec.DownstreamResources = resources("Secret/db", "ConfigMap/foreign", "ConfigMap/beside")
		w.apply(app)
		waitConfigMap(t, pulled, dest, "settings", 10*time.Second, "pruned", func(cm *corev1.ConfigMap) bool { return cm == nil })
	})
	t.Run("untargeted is removed", func(t *testing.T) { pullUntargeted(t, w) })
	t.Run("a ServiceAccount without rights is Forbidden, then copies once granted", func(t *testing.T) { pullServiceAccount(t, w, agent) })
	t.Run("a source deleted and created again reaches the cluster", func(t *testing.T) { pullRecreated(t, w) })
	t.Run("a denied source is not pulled, an opted-out one is removed", func(t *testing.T) { pullDenied(t, w) })
	t.Run("a GitRepo's Bundle named like the HelmOp is pulled apart from it", func(t *testing.T) { pullBundle(t, w) })
	t.Run("HelmOp deleted is removed, keepResources kept", func(t *testing.T) { pullDeleted(t, w, dest) })
	t.Run("the canary is nowhere but in the copy", func(t *testing.T) { pullCanary(t, w, agent, canary) })
}

// pullWatchServed: the agent's watch of its Cluster's rows, which has
// just carried a change, is one Courier serves from its own loop
// (pkg/agentwatch), with a smaller stack per watch than the generic
// handler's, and not the generic handler's.
func pullWatchServed(t *testing.T) {
	m := scrape(t)
	if watches, events := metricValue(m, "courier_agent_watches"), metricValue(m, "courier_agent_watch_events_total"); watches < 1 || events < 1 {
		t.Fatalf("courier_agent_watches %v, courier_agent_watch_events_total %v: the agent's watch is not served by pkg/agentwatch\n%s",
			watches, events, grepLines(m, `resource="downstreamcopies"`))
	}
}

func configMapData(key, value string) func(*corev1.ConfigMap) bool {
	return func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data[key] == value }
}

func pullDrift(t *testing.T, dest, canary string) {
	ctx := context.Background()
	d := downstream(t, pulled)
	s, err := d.CoreV1().Secrets(dest).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["password"] = []byte("edited")
	if _, err := d.CoreV1().Secrets(dest).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, pulled, dest, "db", 10*time.Second, "edit repaired", secretData("password", canary))
	if err := d.CoreV1().ConfigMaps(dest).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigMap(t, pulled, dest, "settings", 10*time.Second, "deletion repaired", configMapData("mode", "changed"))
}

// pullConflict: a same-named ConfigMap nobody gave Courier is never
// written; the agent says Conflict, and the next entry is copied beside it.
func pullConflict(t *testing.T, w *workspace, agent *localenv.Agent, app *fleet.HelmOp, dest string) {
	ctx := context.Background()
	d := downstream(t, pulled)
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dest, Name: "foreign"}, Data: map[string]string{"owner": "someone"}}
	if _, err := d.CoreV1().ConfigMaps(dest).Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Data: map[string]string{"owner": "courier"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "beside"}, Data: map[string]string{"k": "v"}})
	app.Spec.DownstreamResources = resources("Secret/db", "ConfigMap/settings", "ConfigMap/foreign", "ConfigMap/beside")
	w.apply(app)
	waitConfigMap(t, pulled, dest, "beside", 10*time.Second, "copied beside the conflict", configMapData("k", "v"))
	agentLogSays(t, agent, "the agent reports the Conflict", `phase="Conflict"`, dest+"/foreign", "not managed by Courier")
	cm, err := d.CoreV1().ConfigMaps(dest).Get(ctx, "foreign", metav1.GetOptions{})
	if err != nil || cm.Data["owner"] != "someone" || cm.Labels[copyspec.LabelManagedBy] != "" {
		t.Errorf("the unowned ConfigMap was touched: %+v (err %v)", cm, err)
	}
}

// pullUntargeted: a HelmOp whose target stops naming the Cluster has its
// copies removed.
func pullUntargeted(t *testing.T, w *workspace) {
	dest := "pull-targeted"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "t"}, StringData: map[string]string{"k": "v"}})
	op := helmOp("targeted", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: resources("Secret/t")},
		fleet.BundleTarget{ClusterName: "edge"})
	w.apply(op)
	waitSecret(t, pulled, dest, "t", 30*time.Second, "copied while targeted", secretData("k", "v"))
	op.Spec.Targets = []fleet.BundleTarget{{ClusterName: "elsewhere"}}
	w.apply(op)
	waitSecret(t, pulled, dest, "t", 10*time.Second, "removed once untargeted", absentSecret)
}

// pullServiceAccount: copies are written as the HelmOp's ServiceAccount in
// the agent namespace; without rights nothing is written and the agent
// names the ServiceAccount; granted, the copy appears without a restart,
// created by that ServiceAccount.
func pullServiceAccount(t *testing.T, w *workspace, agent *localenv.Agent) {
	dest := "pull-sa-dest"
	serviceAccountIn(t, pulled, "pull-deployer", dest)
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sa-s"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("sa-app", fleet.BundleDeploymentOptions{TargetNamespace: dest, ServiceAccount: "pull-deployer", DownstreamResources: resources("Secret/sa-s")}))
	agentLogSays(t, agent, "the agent reports Forbidden naming the ServiceAccount", `phase="Forbidden"`,
		"ServiceAccount "+agentNamespace+"/pull-deployer", "nothing was written")
	if _, err := downstream(t, pulled).CoreV1().Secrets(dest).Get(context.Background(), "sa-s", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("written while forbidden (err %v)", err)
	}
	grant(t, pulled, "pull-deployer", dest, []string{"secrets"}, []string{"get", "create", "update"})
	waitSecret(t, pulled, dest, "sa-s", 60*time.Second, "copied once granted", secretData("k", "v"))
	want := "create secrets " + dest + "/sa-s as system:serviceaccount:" + agentNamespace + ":pull-deployer"
	if !slices.Contains(courierWritesAs(t, pulled), want) {
		t.Errorf("the audit log shows no %q: %q", want, courierWritesAs(t, pulled))
	}
}

// pullRestart: the agent restarted with every copy current writes nothing
// downstream (its Lease aside). Its pass over the copies is over once it
// has counted each current.
func pullRestart(t *testing.T, agent *localenv.Agent, copies float64) {
	before := copyWrites(t)
	// Positive control: the audit log holds the agent's writes so far.
	if !slices.ContainsFunc(before, func(w string) bool { return strings.HasPrefix(w, "create secrets pull-dest/db ") }) {
		t.Fatalf("the audit log shows no create of pull-dest/db, so counting writes proves nothing: %q", before)
	}
	agent.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := agent.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted agent finds every copy current", func() (bool, string) {
		m, err := agent.Metrics()
		if err != nil {
			return false, err.Error()
		}
		n := metricValue(m, `courier_copies_total{reason="",result="current"}`)
		return n >= copies, "current: " + strconv.FormatFloat(n, 'f', -1, 64)
	})
	if after := copyWrites(t); len(after) != len(before) {
		t.Errorf("the restart wrote %q", after[len(before):])
	}
}

// metricValue reads one sample of a Prometheus text exposition (0 when
// absent).
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// pullDeleted: deleting a HelmOp removes its copies, except those of a
// HelmOp with keepResources.
func pullDeleted(t *testing.T, w *workspace, dest string) {
	keepDest := "pull-keep"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("keeper", fleet.BundleDeploymentOptions{DefaultNamespace: keepDest, KeepResources: true, DownstreamResources: resources("Secret/kept")}))
	waitSecret(t, pulled, keepDest, "kept", 30*time.Second, "copied", secretData("k", "v"))
	f := fleetClient(t).FleetV1alpha1().HelmOps(w.ns)
	for _, op := range []string{"keeper", "app"} {
		if err := f.Delete(context.Background(), op, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitSecret(t, pulled, dest, "db", 10*time.Second, "removed with its HelmOp", absentSecret)
	waitConfigMap(t, pulled, dest, "beside", 10*time.Second, "removed with its HelmOp", func(cm *corev1.ConfigMap) bool { return cm == nil })
	if _, err := downstream(t, pulled).CoreV1().Secrets(keepDest).Get(context.Background(), "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("the keepResources copy is gone: %v", err)
	}
}

// pullCanary: the Secret's value, plain or in base64, is in no row, Event,
// metric or log of Courier or the agent.
func pullCanary(t *testing.T, w *workspace, agent *localenv.Agent, canary string) {
	ctx := context.Background()
	places := map[string]string{}
	for name, path := range map[string]string{"the agent's log": agent.LogPath, "Courier's log": courier.LogPath} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		places[name] = string(b)
	}
	m, err := agent.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	places["the agent's metrics"] = m
	places["Courier's metrics"] = scrape(t)
	events, err := w.c.kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, obj := range map[string]any{"the upstream Events": events, "the rows": rows} {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		places[name] = string(b)
	}
	downEvents, err := downstream(t, pulled).CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(downEvents)
	places["downstream-2's Events"] = string(b)
	// Positive control: the agent's log is at -v=2 and records its writes.
	if !strings.Contains(places["the agent's log"], `"Copied"`) {
		t.Errorf("the agent's log records no copy: the check below would prove nothing")
	}
	for where, text := range places {
		for _, leak := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))} {
			if strings.Contains(text, leak) {
				t.Errorf("the Secret's value appears in %s", where)
			}
		}
	}
}

// pullRecreated is the loop that deciding from a displayed phase invites
// (docs/design.md#pull-delivery): the source of a pulled Cluster's copy is deleted (its row
// SourceMissing, the copy stays) and created again with a new value; the
// new value must reach the cluster and the row turn Synced within 60 s.
// pullBundle: a Bundle's rows reach the agent, which files their copies
// under the Bundle (courier.dev/bundle), apart from the HelmOp "app" of
// the same name; deleting the Bundle removes its copy only.
func pullBundle(t *testing.T, w *workspace) {
	const dest = "pull-bundle"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bundled"}, StringData: map[string]string{"k": "git"}})
	w.apply(gitRepoBundle("app", "repo", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: resources("Secret/bundled")},
		[]fleet.BundleTarget{{Name: "edge", ClusterName: "edge"}}))
	waitSecret(t, pulled, dest, "bundled", 30*time.Second, "copied for the Bundle", func(s *corev1.Secret) bool {
		return s != nil && string(s.Data["k"]) == "git" && s.Annotations[copyspec.AnnotationBundle] == w.ns+"/app" && s.Annotations[copyspec.AnnotationHelmOp] == ""
	})
	byBundle := metav1.ListOptions{FieldSelector: "spec.owner.kind=Bundle,spec.owner.name=app"}
	w.waitRows(byBundle, "edge/Secret/bundled@"+dest+"=Synced")
	if err := fleetClient(t).FleetV1alpha1().Bundles(w.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, pulled, dest, "bundled", 30*time.Second, "removed with its Bundle", absentSecret)
	w.waitRows(byBundle)
	w.waitRows(metav1.ListOptions{FieldSelector: "spec.helmOp=app,spec.source.name=db"}, "edge/Secret/db@pull-dest=Synced")
}

func pullRecreated(t *testing.T, w *workspace) {
	const dest = "pull-phoenix"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "phoenix"}, StringData: map[string]string{"k": "first"}})
	w.apply(helmOp("phoenix", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: resources("Secret/phoenix")}))
	waitSecret(t, pulled, dest, "phoenix", 30*time.Second, "copied", secretData("k", "first"))
	byOp := metav1.ListOptions{FieldSelector: "spec.helmOp=phoenix"}
	w.waitRows(byOp, "edge/Secret/phoenix@"+dest+"=Synced")
	if err := w.c.kube.CoreV1().Secrets(w.ns).Delete(context.Background(), "phoenix", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitRows(byOp, "edge/Secret/phoenix@"+dest+"=SourceMissing")
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "phoenix"}, StringData: map[string]string{"k": "second"}})
	waitSecret(t, pulled, dest, "phoenix", 60*time.Second, "the re-created source's value copied", secretData("k", "second"))
	w.waitRows(byOp, "edge/Secret/phoenix@"+dest+"=Synced")
}

// pullDenied is the export rule (docs/design.md#export-safety) for a pulled Cluster:
// a Helm release Secret is never pulled (the ordinary Secret beside it
// is, the positive control), and a copied Secret annotated
// courier.dev/export: "false" afterwards is removed by the agent.
func pullDenied(t *testing.T, w *workspace) {
	const dest = "pull-guarded"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1"}, Type: "helm.sh/release.v1",
		StringData: map[string]string{"release": "state"}})
	w.apply(helmOp("guarded", fleet.BundleDeploymentOptions{DefaultNamespace: dest,
		DownstreamResources: resources("Secret/plain", "Secret/sh.helm.release.v1.web.v1")}))
	byOp := metav1.ListOptions{FieldSelector: "spec.helmOp=guarded"}
	w.waitRows(byOp, "edge/Secret/plain@"+dest+"=Synced", "edge/Secret/sh.helm.release.v1.web.v1@"+dest+"=Denied")
	waitSecret(t, pulled, dest, "plain", 10*time.Second, "the ordinary Secret pulled", secretData("k", "v"))
	if _, err := downstream(t, pulled).CoreV1().Secrets(dest).Get(context.Background(), "sh.helm.release.v1.web.v1", metav1.GetOptions{}); err == nil {
		t.Error("the Helm release Secret was pulled")
	}
	// The same source pulled with keepResources by another HelmOp.
	w.apply(helmOp("guarded-kept", fleet.BundleDeploymentOptions{DefaultNamespace: dest + "-kept", KeepResources: true,
		DownstreamResources: resources("Secret/plain")}))
	waitSecret(t, pulled, dest+"-kept", "plain", 30*time.Second, "the ordinary Secret pulled with keepResources", secretData("k", "v"))

	// Fleet's own agent copied the denied Helm release Secret: the row
	// says so, and a Warning Event names the Cluster; the agent leaves
	// Fleet's object alone.
	ctx := context.Background()
	fleets, err := downstream(t, pulled).CoreV1().Secrets(dest).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1",
		Labels: map[string]string{"fleet.cattle.io/bundledeployment": "guarded-edge"}}, Type: "helm.sh/release.v1",
		StringData: map[string]string{"release": "state"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rowSays(t, w, copyview.RowName("guarded", "edge", "Secret", "sh.helm.release.v1.web.v1"), "type helm.sh/release.v1",
		"Fleet's own agent exported it", "in cluster edge", "BundleDeployment guarded-edge")
	warningSays(t, w, "ExportedByFleet", "guarded", "in cluster edge")

	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain", Annotations: map[string]string{exportpolicy.AnnotationExport: "false"}},
		StringData: map[string]string{"k": "v"}})
	waitSecret(t, pulled, dest, "plain", 30*time.Second, "removed once opted out", absentSecret)
	w.waitRows(byOp, "edge/Secret/plain@"+dest+"=Denied", "edge/Secret/sh.helm.release.v1.web.v1@"+dest+"=Denied")
	// keepResources keeps copies, never a leak: the agent removes the
	// kept copy too, its row says so, and Courier records the Warning
	// Event the agent cannot.
	waitSecret(t, pulled, dest+"-kept", "plain", 30*time.Second, "the keepResources copy removed once opted out", absentSecret)
	rowSays(t, w, copyview.RowName("guarded-kept", "edge", "Secret", "plain"), `annotated courier.dev/export: "false"`,
		"written with keepResources, was removed from cluster edge")
	warningSays(t, w, "ExportRetracted", "guarded-kept", "Secret "+dest+"-kept/plain, written with keepResources, was removed from cluster edge")

	got, err := downstream(t, pulled).CoreV1().Secrets(dest).Get(ctx, "sh.helm.release.v1.web.v1", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != fleets.ResourceVersion {
		t.Errorf("Fleet's copy was touched: %v (resourceVersion %q, was %q)", err, got.GetResourceVersion(), fleets.ResourceVersion)
	}
}

// rowSays waits until the row's message holds every one of subs.
func rowSays(t *testing.T, w *workspace, row string, subs ...string) {
	t.Helper()
	eventually(t, "row "+row+" says "+strings.Join(subs, ", "), func() (bool, string) {
		r, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).Get(context.Background(), row, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range subs {
			if !strings.Contains(r.Status.Message, s) {
				return false, string(r.Status.Phase) + ": " + r.Status.Message
			}
		}
		return true, ""
	})
}

// warningSays waits for a Warning Event with reason on the HelmOp owner
// whose message holds what.
func warningSays(t *testing.T, w *workspace, reason, owner, what string) {
	t.Helper()
	eventually(t, "a Warning Event "+reason+" on HelmOp "+owner, func() (bool, string) {
		out := kubectl(t, "get", "events", "-n", w.ns, "--field-selector", "type=Warning,reason="+reason+",involvedObject.name="+owner,
			"-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, what), out
	})
}
