package copyview

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/exportpolicy"
)

// fakeTypes answers Secret types by name and counts the lookups by UID.
type fakeTypes struct {
	mu      sync.Mutex
	types   map[string]corev1.SecretType // by name; Opaque when absent
	fail    map[string]bool              // names whose lookup fails
	lookups map[types.UID]int
	forgot  []types.UID
	// kubeconfigs are the names of Secrets whose data holds a kubeconfig
	// with credentials; reads counts the content reads by UID@rv.
	kubeconfigs map[string]bool
	reads       map[string]int
}

func newFakeTypes(t map[string]corev1.SecretType) *fakeTypes {
	return &fakeTypes{types: t, fail: map[string]bool{}, lookups: map[types.UID]int{}, kubeconfigs: map[string]bool{}, reads: map[string]int{}}
}

func (f *fakeTypes) KubeconfigContent(_ context.Context, _, name string, uid types.UID, rv string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[string(uid)+"@"+rv]++
	if f.fail[name] {
		return false, errors.New("connection refused")
	}
	return f.kubeconfigs[name], nil
}

func (f *fakeTypes) Type(_ context.Context, _, name string, uid types.UID) (corev1.SecretType, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups[uid]++
	if f.fail[name] {
		return "", errors.New("connection refused")
	}
	if t, ok := f.types[name]; ok {
		return t, nil
	}
	return corev1.SecretTypeOpaque, nil
}

func (f *fakeTypes) Forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgot = append(f.forgot, uid)
}

func secretWithUID(name, rv string) any {
	s := source("Secret", name, rv)
	s.UID = types.UID("uid-" + name)
	return s
}

// exportFixture is a controller whose view applies the deny list, over a
// HelmOp listing an ordinary Secret, a Cluster's kubeconfig Secret, a
// ServiceAccount token and a ConfigMap, targeting Clusters c1 (whose
// kubeconfig is listed) and c2.
func exportFixture(t *testing.T, denyList bool) (*fixture, *fakeTypes, *record.FakeRecorder) {
	t.Helper()
	st := newFakeTypes(map[string]corev1.SecretType{"token": corev1.SecretTypeServiceAccountToken})
	recorder := record.NewFakeRecorder(100)
	c1 := cluster("c1", nil)
	c1.Spec.KubeConfigSecret = "c1-kubeconfig"
	op := helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{
		{Kind: "Secret", Name: "creds"}, {Kind: "Secret", Name: "c1-kubeconfig"}, {Kind: "secret", Name: "token"}, {Kind: "ConfigMap", Name: "settings"},
	}})
	f := newFixtureWith(t, Events{Recorder: recorder}, func(c *caches, in *Inputs) {
		clusters, err := exportpolicy.NewIndexerClusters(c.clusters)
		if err != nil {
			t.Fatal(err)
		}
		in.Exports = exportpolicy.New(denyList, clusters)
		in.SecretTypes = st
	}, op, c1, cluster("c2", nil), defaultGroup,
		secretWithUID("creds", "1"), secretWithUID("c1-kubeconfig", "2"), secretWithUID("token", "3"), source("ConfigMap", "settings", "4"))
	return f, st, recorder
}

// phases returns each stored row's phase and deliver label.
func phases(f *fixture) map[string]string {
	out := map[string]string{}
	for name, r := range f.rows() {
		out[name] = string(r.Status.Phase) + " deliver=" + r.Labels[courier.LabelDeliver]
	}
	return out
}

func TestDeniedSourcesAreNotWritten(t *testing.T) {
	f, st, recorder := exportFixture(t, true)
	want := map[string]string{
		"app.c1.secret.creds":         "Pending deliver=true",
		"app.c2.secret.creds":         "Pending deliver=true",
		"app.c1.configmap.settings":   "Pending deliver=true",
		"app.c2.configmap.settings":   "Pending deliver=true",
		"app.c1.secret.c1-kubeconfig": "Denied deliver=false",
		"app.c2.secret.c1-kubeconfig": "Denied deliver=false",
		"app.c1.secret.token":         "Denied deliver=false",
		"app.c2.secret.token":         "Denied deliver=false",
	}
	if got := phases(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows:\n got %v\nwant %v", got, want)
	}
	// The other entries of the HelmOp are unaffected: only they are
	// delivered.
	wantDesired := []string{"app.c1.configmap.settings", "app.c1.secret.creds", "app.c2.configmap.settings", "app.c2.secret.creds"}
	if got := f.engine.desiredOf(appOp); !reflect.DeepEqual(got, wantDesired) {
		t.Errorf("engine was handed %v, want %v", got, wantDesired)
	}
	for name, subs := range map[string][]string{
		"app.c2.secret.c1-kubeconfig": {"Secret fleet-default/c1-kubeconfig is never exported", "kubeconfig of Cluster fleet-default/c1", exportpolicy.RuleKubeconfig,
			"nothing is written to cluster c2"},
		"app.c1.secret.token": {"type kubernetes.io/service-account-token", exportpolicy.RuleSecretType},
	} {
		r := f.row(name)
		for _, s := range subs {
			if !strings.Contains(r.Status.Message, s) {
				t.Errorf("row %s: message %q does not say %q", name, r.Status.Message, s)
			}
		}
		if c := r.Status.Conditions; len(c) != 1 || c[0].Status != "False" || c[0].Reason != "Denied" {
			t.Errorf("row %s: conditions %+v, want Ready False for Denied", name, c)
		}
	}
	// Each Secret's type is looked up once, and not at all for the
	// kubeconfig, which is denied whatever its type.
	if got := st.lookups; !reflect.DeepEqual(got, map[types.UID]int{"uid-creds": 1, "uid-token": 1}) {
		t.Errorf("type lookups %v", got)
	}
	// One Warning Event per denied source, naming it and its rule.
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if len(events) != 2 || !strings.Contains(strings.Join(events, "\n"), "Warning ExportDenied Secret fleet-default/c1-kubeconfig is never exported") {
		t.Errorf("events %q, want one ExportDenied Warning per denied source", events)
	}
}

func TestExportVerdictFollowsItsInputs(t *testing.T) {
	f, st, _ := exportFixture(t, true)

	// The annotation added to a copied ConfigMap: its rows turn Denied and
	// leave the engine (which then removes the copies, or keeps them).
	settings := source("ConfigMap", "settings", "4")
	optedOut := source("ConfigMap", "settings", "5")
	optedOut.Annotations = map[string]string{exportpolicy.AnnotationExport: "false"}
	f.update(settings, optedOut)
	f.drain()
	if got := f.row("app.c1.configmap.settings"); got.Status.Phase != courier.CopyPhaseDenied || courier.Delivered(got.Labels) ||
		!strings.Contains(got.Status.Message, `courier.dev/export: "false"`) {
		t.Errorf("opted-out ConfigMap row: %s %v %q", got.Status.Phase, got.Labels, got.Status.Message)
	}
	if got := f.engine.desiredOf(appOp); !reflect.DeepEqual(got, []string{"app.c1.secret.creds", "app.c2.secret.creds"}) {
		t.Errorf("engine was handed %v after the opt-out", got)
	}

	// Taken away again: a new version of a Denied row's source is a full
	// sync, and the rows come back.
	back := source("ConfigMap", "settings", "6")
	f.update(optedOut, back)
	f.drain()
	if got := f.row("app.c2.configmap.settings"); got.Status.Phase != courier.CopyPhasePending || !courier.Delivered(got.Labels) || got.Spec.Source.ResourceVersion != "6" {
		t.Errorf("ConfigMap row after the opt-out went: %s %v rv %s", got.Status.Phase, got.Labels, got.Spec.Source.ResourceVersion)
	}

	// A Cluster starts naming the ordinary Secret as its kubeconfig.
	c2 := cluster("c2", nil)
	named := cluster("c2", nil)
	named.Spec.KubeConfigSecret = "creds"
	f.update(c2, named)
	f.drain()
	if got := f.row("app.c1.secret.creds"); got.Status.Phase != courier.CopyPhaseDenied || !strings.Contains(got.Status.Message, "Cluster fleet-default/c2") {
		t.Errorf("creds row after c2 names it: %s %q", got.Status.Phase, got.Status.Message)
	}
	if got := f.engine.desiredOf(appOp); !reflect.DeepEqual(got, []string{"app.c1.configmap.settings", "app.c2.configmap.settings"}) {
		t.Errorf("engine was handed %v after c2 named creds", got)
	}

	// A deleted Secret's type is forgotten.
	f.remove(secretWithUID("token", "3"))
	f.drain()
	if !reflect.DeepEqual(st.forgot, []types.UID{"uid-token"}) {
		t.Errorf("forgotten %v, want the token's UID", st.forgot)
	}
}

// A Secret whose type cannot be learnt holds its HelmOp's sync: nothing
// is handed to the engine on a guess, and the retry decides.
func TestUnknownSecretTypeHoldsTheHelmOp(t *testing.T) {
	f, st, _ := exportFixture(t, true)
	st.mu.Lock()
	st.fail["fresh"] = true
	st.mu.Unlock()
	before := f.engine.desiredOf(appOp)
	f.add(secretWithUID("fresh", "9"))
	op := helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{
		{Kind: "Secret", Name: "creds"}, {Kind: "Secret", Name: "fresh"},
	}})
	f.update(helmOp("app", fleet.BundleDeploymentOptions{}), op)
	f.drain()
	if got := f.engine.desiredOf(appOp); !reflect.DeepEqual(got, before) {
		t.Errorf("engine was handed %v while a type was unknown, want still %v", got, before)
	}
	if _, ok := f.rows()["app.c1.secret.fresh"]; ok {
		t.Error("a row of the Secret of unknown type was written")
	}
	st.mu.Lock()
	st.fail["fresh"] = false
	st.mu.Unlock()
	f.c.enqueue(appOp)
	f.drain()
	if got := f.row("app.c1.secret.fresh"); got.Status.Phase != courier.CopyPhasePending {
		t.Errorf("row once the type is known: %s", got.Status.Phase)
	}
}

// With the deny list off, only the annotation denies.
func TestDenyListOff(t *testing.T) {
	f, _, _ := exportFixture(t, false)
	for _, name := range []string{"app.c1.secret.c1-kubeconfig", "app.c1.secret.token", "app.c1.secret.creds"} {
		if got := f.row(name); got.Status.Phase != courier.CopyPhasePending || !courier.Delivered(got.Labels) {
			t.Errorf("row %s with the deny list off: %s %v", name, got.Status.Phase, got.Labels)
		}
	}
}

// TestKubeconfigContentIsDecidedByTheView: a listed Secret whose data
// becomes a kubeconfig with credentials (a new version of it) turns its
// rows Denied by rule kubeconfig-content, asked about that version; the
// earlier version's rows were delivered, and a Secret denied by name is
// never read.
func TestKubeconfigContentIsDecidedByTheView(t *testing.T) {
	f, st, _ := exportFixture(t, true)
	if got := f.row("app.c1.secret.creds"); got.Status.Phase != courier.CopyPhasePending {
		t.Fatalf("creds before: %s %q", got.Status.Phase, got.Status.Message)
	}
	st.mu.Lock()
	st.kubeconfigs["creds"] = true
	st.mu.Unlock()
	f.update(secretWithUID("creds", "1"), secretWithUID("creds", "7"))
	f.drain()
	for _, name := range []string{"app.c1.secret.creds", "app.c2.secret.creds"} {
		got := f.row(name)
		if got.Status.Phase != courier.CopyPhaseDenied || courier.Delivered(got.Labels) ||
			!strings.Contains(got.Status.Message, exportpolicy.RuleKubeconfigContent) {
			t.Errorf("%s: %s %v %q, want Denied by %s", name, got.Status.Phase, got.Labels, got.Status.Message, exportpolicy.RuleKubeconfigContent)
		}
	}
	if got := f.engine.desiredOf(appOp); !reflect.DeepEqual(got, []string{"app.c1.configmap.settings", "app.c2.configmap.settings"}) {
		t.Errorf("engine was handed %v", got)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// Asked about the version the view holds (the real lookup reads each
	// version once: exportpolicy.SecretTypes).
	if n := st.reads["uid-creds@7"]; n == 0 {
		t.Errorf("version 7 of creds was never asked about: %v", st.reads)
	}
	if n := st.reads["uid-c1-kubeconfig@2"]; n != 0 {
		t.Errorf("the Cluster's kubeconfig was read %d times; it is denied by name, unread", n)
	}
}
