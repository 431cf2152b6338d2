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

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyview"
	"github.com/courier-dev/courier/pkg/exportpolicy"
)

// TestExportDenyList is docs/design.md#export-safety as it was once found broken: a
// HelmOp in workspace export-deny lists Cluster c1's kubeconfig Secret
// and targets c2 (downstream-2). With it, an ordinary Secret, a Secret of
// each type never exported, and a ConfigMap. The ordinary Secret and the
// ConfigMap are copied (the positive control, in the same pass); nothing
// denied is, and each denied row says why. Then the ConfigMap is annotated
// courier.dev/export: "false": its copy is removed, and so is a second
// HelmOp's copy of it written with keepResources, with a Warning Event. No row, Event, log line
// or metric holds any denied Secret's data.
func TestExportDenyList(t *testing.T) {
	ctx := context.Background()
	w := newWorkspace(t, "export-deny", map[string]string{"env": "a"}, map[string]string{"env": "b"})
	const dest = "export-dest"
	canary := randomHex(t)
	kube := w.c.kube
	if _, err := kube.CoreV1().ServiceAccounts(w.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// c1's kubeconfig Secret holds the canary too (beside its kubeconfig).
	kc, err := kube.CoreV1().Secrets(w.ns).Get(ctx, "c1-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc.Data["canary"] = []byte(canary)
	if _, err := kube.CoreV1().Secrets(w.ns).Update(ctx, kc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := func(name string, typ corev1.SecretType, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Type: typ,
			Data: map[string][]byte{"canary": []byte(canary)}}
	}
	w.apply(secret("app-creds", corev1.SecretTypeOpaque, nil))
	w.apply(secret("robot-token", corev1.SecretTypeServiceAccountToken, map[string]string{corev1.ServiceAccountNameKey: "robot"}))
	w.apply(secret("bootstrap-token-abcdef", corev1.SecretTypeBootstrapToken, nil))
	w.apply(secret("sh.helm.release.v1.app.v1", "helm.sh/release.v1", nil))
	w.apply(secret("bd-options", "fleet.cattle.io/bundle-deployment/v1alpha1", nil))
	w.apply(secret("private", corev1.SecretTypeOpaque, map[string]string{exportpolicy.AnnotationExport: "false"}))
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"color": "blue"}})

	listed := resources("Secret/app-creds", "Secret/c1-kubeconfig", "Secret/robot-token", "secret/bootstrap-token-abcdef",
		"Secret/sh.helm.release.v1.app.v1", "Secret/bd-options", "Secret/private", "ConfigMap/settings")
	w.apply(helmOp("deny", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: listed},
		fleet.BundleTarget{ClusterName: "c2"}))
	w.apply(helmOp("keep", fleet.BundleDeploymentOptions{DefaultNamespace: dest + "-kept", KeepResources: true,
		DownstreamResources: resources("ConfigMap/settings")}, fleet.BundleTarget{ClusterName: "c2"}))

	w.waitRows(metav1.ListOptions{},
		"c2/Secret/app-creds@"+dest+"=Synced",
		"c2/ConfigMap/settings@"+dest+"=Synced",
		"c2/ConfigMap/settings@"+dest+"-kept=Synced",
		"c2/Secret/c1-kubeconfig@"+dest+"=Denied",
		"c2/Secret/robot-token@"+dest+"=Denied",
		"c2/Secret/bootstrap-token-abcdef@"+dest+"=Denied",
		"c2/Secret/sh.helm.release.v1.app.v1@"+dest+"=Denied",
		"c2/Secret/bd-options@"+dest+"=Denied",
		"c2/Secret/private@"+dest+"=Denied",
	)
	// The positive control is downstream; the denied Secrets were part of
	// the same pass and are not.
	waitSecret(t, 1, dest, "app-creds", 10*time.Second, "the ordinary Secret copied", secretData("canary", canary))
	for _, name := range []string{"c1-kubeconfig", "robot-token", "bootstrap-token-abcdef", "sh.helm.release.v1.app.v1", "bd-options", "private"} {
		if _, err := downstream(t, 1).CoreV1().Secrets(dest).Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("denied Secret %s was copied to downstream-2", name)
		}
	}
	rows := map[string]string{}
	list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		rows[r.Spec.HelmOp+"/"+r.Spec.Source.Name] = r.Status.Message
	}
	for row, want := range map[string]string{
		"deny/c1-kubeconfig":             "it is the kubeconfig of Cluster export-deny/c1",
		"deny/robot-token":               "type kubernetes.io/service-account-token",
		"deny/bootstrap-token-abcdef":    "type bootstrap.kubernetes.io/token",
		"deny/sh.helm.release.v1.app.v1": "type helm.sh/release.v1",
		"deny/bd-options":                "type fleet.cattle.io/bundle-deployment/v1alpha1",
		"deny/private":                   `annotated courier.dev/export: "false"`,
	} {
		if !strings.Contains(rows[row], want) {
			t.Errorf("row %s: message %q does not say %q", row, rows[row], want)
		}
	}

	// The annotation added after copying: the copy goes, the kept one stays.
	waitConfigMap(t, 1, dest+"-kept", "settings", 10*time.Second, "the keepResources copy", func(c *corev1.ConfigMap) bool { return c != nil })
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Annotations: map[string]string{exportpolicy.AnnotationExport: "false"}},
		Data: map[string]string{"color": "blue"}})
	waitConfigMap(t, 1, dest, "settings", 30*time.Second, "the opted-out ConfigMap's copy removed", func(c *corev1.ConfigMap) bool { return c == nil })
	// keepResources keeps copies nothing wants, never a leak: the copy
	// written with it goes too, with a Warning Event saying why.
	waitConfigMap(t, 1, dest+"-kept", "settings", 30*time.Second, "the keepResources copy of the opted-out ConfigMap removed",
		func(c *corev1.ConfigMap) bool { return c == nil })
	w.waitRows(metav1.ListOptions{FieldSelector: "spec.source.name=settings"},
		"c2/ConfigMap/settings@"+dest+"=Denied", "c2/ConfigMap/settings@"+dest+"-kept=Denied")
	warningSays(t, w, "ExportRetracted", "keep", "ConfigMap "+dest+"-kept/settings, written with keepResources, was removed from cluster c2")
	rowSays(t, w, copyview.RowName("keep", "c2", "ConfigMap", "settings"), "(rule export-annotation)",
		"ConfigMap "+dest+"-kept/settings, written with keepResources, was removed from cluster c2")

	// No row, Event, log line or metric holds the data. Positive controls
	// first: each text is about this workspace, and the canary is found
	// where it belongs (the ordinary copy downstream).
	dcp := kubectl(t, "get", "dcp", "-n", w.ns, "-o", "yaml")
	events := kubectl(t, "get", "events", "-n", w.ns, "-o", "yaml")
	logBytes, err := os.ReadFile(courier.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	metrics := scrape(t)
	for where, want := range map[string][2]string{
		"downstreamcopies": {dcp, "never exported"},
		"Events":           {events, "ExportDenied"},
		"Courier's log":    {string(logBytes), "lists a source that is never exported"},
		"/metrics":         {metrics, w.ns + "/c2"},
	} {
		if !strings.Contains(want[0], want[1]) {
			t.Errorf("%s does not mention %q: the leak check below would prove nothing", where, want[1])
		}
	}
	copyYAML, err := env.Kubectl(ctx, env.Downstreams[1], "get", "secret", "-n", dest, "app-creds", "-o", "yaml")
	if err != nil || !strings.Contains(copyYAML, base64.StdEncoding.EncodeToString([]byte(canary))) {
		t.Errorf("the ordinary copy's YAML does not hold the canary in base64 (err %v): the search is broken", err)
	}
	for where, text := range map[string]string{"downstreamcopies": dcp, "Events": events, "Courier's log": string(logBytes), "/metrics": metrics} {
		for _, form := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))} {
			if strings.Contains(text, form) {
				t.Errorf("a denied Secret's data appears in %s", where)
			}
		}
	}
}
