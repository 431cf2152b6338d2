package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/exportpolicy"
)

// Export safety for field copies (docs/security.md#field-copies): the
// shared Courier runs with --fieldcopy-secret-sources (fieldCopyArgs), so
// the export rule is what refuses these Secrets.

// tokenKubeconfig is a kubeconfig whose user carries a token: the canary.
func tokenKubeconfig(canary string) []byte {
	return []byte(`apiVersion: v1
kind: Config
clusters:
- name: elsewhere
  cluster: {server: "https://192.0.2.10:6443"}
contexts:
- name: elsewhere
  context: {cluster: elsewhere, user: admin}
current-context: elsewhere
users:
- name: admin
  user: {token: "` + canary + `"}
`)
}

const copyDataRule = "k8s-copier.fig.org/replace-spec.template.data"

// fedSecretFrom creates FederatedSecret fs-<source> in ns copying the data
// of Secret source into spec.template.data.
func fedSecretFrom(t *testing.T, dyn dynamic.Interface, ns, source string) string {
	t.Helper()
	name := "fs-" + source
	create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns, name,
		map[string]string{copyDataRule: "secret:" + source + ":data"}, map[string]any{"template": map[string]any{"kept": "yes"}}))
	return name
}

// templateData returns spec.template.data of FederatedSecret ns/name, and
// whether it is there.
func templateData(t *testing.T, dyn dynamic.Interface, ns, name string) (map[string]any, bool) {
	t.Helper()
	u, err := dyn.Resource(fedSecrets).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, found, _ := unstructured.NestedMap(u.Object, "spec", "template", "data")
	return m, found
}

// TestFieldCopyExportSafety: field copies from a Cluster's kubeconfig
// Secret, from a Secret holding a kubeconfig with a token, and from a
// Secret of a Rancher type are Refused naming their rule, their targets
// never holding the value, beside a copy from an ordinary Secret that
// applies (the positive control). Then the ordinary Secret of a second
// copy is annotated courier.dev/export: "false": what was copied is removed
// from its target and the row says so. No canary reaches a row, an Event,
// Courier's log or /metrics.
func TestFieldCopyExportSafety(t *testing.T) {
	ctx := context.Background()
	dyn := fieldCopySetup(t)
	w := newWorkspace(t, "fc-export", map[string]string{"env": "a"})
	canary := randomHex(t)
	kube := w.c.kube
	kc, err := kube.CoreV1().Secrets(w.ns).Get(ctx, "c1-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc.Data["canary"] = []byte(canary)
	if _, err := kube.CoreV1().Secrets(w.ns).Update(ctx, kc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Data: map[string][]byte{"k": []byte(canary)}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string][]byte{"k": []byte(canary)}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kc-content"}, Data: map[string][]byte{"config": tokenKubeconfig(canary)}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud"}, Type: "management.cattle.io/cloud-credential",
		Data: map[string][]byte{"k": []byte(canary)}})

	denied := map[string]string{
		"c1-kubeconfig": "(rule " + exportpolicy.RuleKubeconfig + ")",
		"kc-content":    "(rule " + exportpolicy.RuleKubeconfigContent + ")",
		"cloud":         "(rule " + exportpolicy.RuleSecretType + ")",
	}
	for _, s := range []string{"plain", "later", "c1-kubeconfig", "kc-content", "cloud"} {
		fedSecretFrom(t, dyn, w.ns, s)
	}
	row := func(source string) string { return "federatedsecret.fs-" + source + ".spec.template.data" }
	waitFieldCopy(t, w.ns, row("plain"), "Applied", "holds data of secret")
	waitFieldCopy(t, w.ns, row("later"), "Applied", "holds data of secret")
	for source, rule := range denied {
		waitFieldCopy(t, w.ns, row(source), "Refused", rule)
	}
	// The positive control holds the value; the refused ones, decided in
	// the same passes, hold nothing.
	if got, _ := templateData(t, dyn, w.ns, "fs-plain"); got["k"] != b64(canary) {
		t.Fatalf("the ordinary Secret's copy holds %v", got)
	}
	for source := range denied {
		if got, found := templateData(t, dyn, w.ns, "fs-"+source); found {
			t.Errorf("fs-%s holds %d keys copied from a denied source", source, len(got))
		}
	}

	// The source becomes denied after it was copied: its value leaves the
	// target in the update that refuses the rule; the rest stays.
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later", Annotations: map[string]string{exportpolicy.AnnotationExport: "false"}},
		Data: map[string][]byte{"k": []byte(canary)}})
	waitFieldCopy(t, w.ns, row("later"), "Refused", "what Courier wrote at spec.template.data before is removed from the target")
	if got, found := templateData(t, dyn, w.ns, "fs-later"); found {
		t.Errorf("fs-later still holds %d keys copied from a source now denied", len(got))
	}
	if kept := field(t, dyn, fedSecrets, w.ns, "fs-later", "spec", "template", "kept"); kept != "yes" {
		t.Errorf("fs-later lost a field Courier did not write: %v", kept)
	}

	noCanaryAnywhere(t, w.ns, canary, map[string]string{"fieldcopies": "is never exported", "Events": "Refused"})
}

// noCanaryAnywhere checks that canary, plain or in base64, is in none of
// the rows of both views in ns, the Events of ns, Courier's log and
// /metrics, after positive controls: each text holds its control phrase
// (so it is about this namespace and was read at all).
func noCanaryAnywhere(t *testing.T, ns, canary string, controls map[string]string) {
	t.Helper()
	texts := map[string]string{
		"fieldcopies":      kubectl(t, "get", "fieldcopies", "-n", ns, "-o", "yaml"),
		"downstreamcopies": kubectl(t, "get", "dcp", "-n", ns, "-o", "yaml"),
		"Events":           kubectl(t, "get", "events", "-n", ns, "-o", "yaml"),
		"/metrics":         scrape(t),
	}
	logBytes, err := os.ReadFile(courier.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	texts["Courier's log"] = string(logBytes)
	controls["/metrics"] = "courier_"
	controls["Courier's log"] = "fieldcopies"
	for where, want := range controls {
		if !strings.Contains(texts[where], want) {
			t.Errorf("%s does not mention %q: the leak check below would prove nothing", where, want)
		}
	}
	for where, text := range texts {
		for _, form := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))} {
			if strings.Contains(text, form) {
				t.Errorf("a denied source's data appears in %s", where)
			}
		}
	}
}

// TestKubeconfigContentDenied: a Secret holding a kubeconfig with a token
// that no Cluster names is denied as rule kubeconfig-content on every
// path: a HelmOp listing it has the row Denied (and its ordinary Secret
// beside it is delivered), a field copy from it is Refused, and the pulled
// Cluster's agent gets 403 on its payload (and its ordinary payload).
func TestKubeconfigContentDenied(t *testing.T) {
	ctx := context.Background()
	dyn := fieldCopySetup(t)
	const user = "courier-agent-kc"
	w := pullWorkspace(t, "kc-content", user)
	canary := randomHex(t)
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere-admin"}, Data: map[string][]byte{"config": tokenKubeconfig(canary)}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Data: map[string][]byte{"k": []byte(canary)}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DefaultNamespace: "apps", DownstreamResources: resources("Secret/elsewhere-admin", "Secret/plain")}))
	eventually(t, "the kubeconfig's row Denied by rule "+exportpolicy.RuleKubeconfigContent, func() (bool, string) {
		r, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).Get(ctx, "app.edge.secret.elsewhere-admin", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return string(r.Status.Phase) == "Denied" && strings.Contains(r.Status.Message, "(rule "+exportpolicy.RuleKubeconfigContent+")"),
			string(r.Status.Phase) + ": " + r.Status.Message
	})

	agent := newAgentUser(t, user)
	body, err := agent.payload(ctx, w.ns, "app.edge.secret.plain")
	if err != nil || !strings.Contains(string(body), b64(canary)) {
		t.Fatalf("the ordinary payload (positive control): err %v, holds the value %v", err, strings.Contains(string(body), b64(canary)))
	}
	_, err = agent.payload(ctx, w.ns, "app.edge.secret.elsewhere-admin")
	forbiddenBy(t, "the kubeconfig's payload", err, exportpolicy.RuleKubeconfigContent)
	if err != nil && strings.Contains(err.Error(), canary) {
		t.Error("the refusal quotes the value")
	}

	fedSecretFrom(t, dyn, w.ns, "elsewhere-admin")
	waitFieldCopy(t, w.ns, "federatedsecret.fs-elsewhere-admin.spec.template.data", "Refused", "(rule "+exportpolicy.RuleKubeconfigContent+")")
	if _, found := templateData(t, dyn, w.ns, "fs-elsewhere-admin"); found {
		t.Error("the field copy wrote the kubeconfig")
	}
	noCanaryAnywhere(t, w.ns, canary, map[string]string{"downstreamcopies": exportpolicy.RuleKubeconfigContent, "fieldcopies": exportpolicy.RuleKubeconfigContent})
}

// TestFieldCopySecretSourcesOff: Courier started without
// --fieldcopy-secret-sources refuses a rule whose source is a Secret,
// naming the flag, and never writes it; a rule from a ConfigMap on the
// same kind of target still applies (the positive control).
func TestFieldCopySecretSourcesOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dyn := fieldCopySetup(t)
	ns := fcNamespace(t, "fc-secrets-off")
	kube := upstreamClients(t).kube
	canary := randomHex(t)
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"k": []byte(canary)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	courier.Stop()
	if err := courier.StartWith(ctx, []string{"--fieldcopy-secret-sources=false"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		courier.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := courier.StartWith(ctx, nil); err != nil {
			t.Errorf("restarting Courier with its own flags: %v", err)
		}
	})
	fedSecretFrom(t, dyn, ns, "creds")
	create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns, "fs-settings",
		map[string]string{copyDataRule: "configmap:settings:data"}, map[string]any{"template": map[string]any{}}))
	waitFieldCopy(t, ns, "federatedsecret.fs-settings.spec.template.data", "Applied", "holds data of configmap")
	waitFieldCopy(t, ns, "federatedsecret.fs-creds.spec.template.data", "Refused", "Secret sources are off; see --fieldcopy-secret-sources")
	if _, found := templateData(t, dyn, ns, "fs-creds"); found {
		t.Error("a Secret source was copied with --fieldcopy-secret-sources off")
	}
	if got, _ := templateData(t, dyn, ns, "fs-settings"); got["color"] != "blue" {
		t.Errorf("the ConfigMap's copy holds %v", got)
	}
}
