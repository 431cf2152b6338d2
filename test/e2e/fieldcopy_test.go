package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

const replaceData = "k8s-copier.fig.org/replace-spec.template.data"

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func randomHex(t *testing.T) string {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(raw)
}

// TestFieldCopyK8sCopierExample is k8s-copier's own example: a Secret's
// data copied into a FederatedSecret's spec.template.data, a change of the
// Secret reaching the target within 5 s, the row in `kubectl get
// fieldcopies -A`, and the value in no row, Event or log line.
func TestFieldCopyK8sCopierExample(t *testing.T) {
	dyn := fieldCopySetup(t)
	ns := fcNamespace(t, "fc-example")
	kube := upstreamClients(t).kube
	ctx := context.Background()
	canary := randomHex(t)
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud-secret-master"},
		Data: map[string][]byte{"token": []byte(canary)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns, "fs",
		map[string]string{replaceData: "secret:cloud-secret-master:data"}, map[string]any{"template": map[string]any{}}))
	// The first copy may wait for Courier to discover the CRD the test
	// just installed (target kinds are retried every few seconds).
	waitField(t, dyn, fedSecrets, ns, "fs", time.Minute, map[string]any{"token": b64(canary)}, "spec", "template", "data")
	row := waitFieldCopy(t, ns, "federatedsecret.fs.spec.template.data", "Applied", "")
	if row.Status.LastAppliedTime == nil || row.Spec.Source == nil || row.Spec.Source.Resource != "secret" || row.Spec.Source.Name != "cloud-secret-master" ||
		row.Spec.Target.Kind != "FederatedSecret" || row.Spec.Mode != "Replace" {
		t.Errorf("row: %+v", row)
	}

	canary2 := randomHex(t)
	s, err := kube.CoreV1().Secrets(ns).Get(ctx, "cloud-secret-master", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"token": []byte(canary2)}
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitField(t, dyn, fedSecrets, ns, "fs", 5*time.Second, map[string]any{"token": b64(canary2)}, "spec", "template", "data")

	f := kubectlRows(t)[ns+"/federatedsecret.fs.spec.template.data"]
	if len(f) < 7 || f[2] != "FederatedSecret/fs" || f[3] != "spec.template.data" || f[4] != "secret:"+ns+"/cloud-secret-master:data" || f[6] != "Applied" {
		t.Errorf("kubectl get fieldcopies -A row: %q", f)
	}

	rows := kubectl(t, "get", "fieldcopies", "-n", ns, "-o", "yaml")
	events := kubectl(t, "get", "events", "-n", ns, "-o", "yaml")
	logBytes, err := os.ReadFile(courier.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{"fieldcopies": rows, "Events": events, "Courier's log": string(logBytes)} {
		for _, c := range []string{canary, canary2} {
			if strings.Contains(text, c) || strings.Contains(text, b64(c)) {
				t.Errorf("a copied value appears in %s", where)
			}
		}
	}
}

// TestFieldCopyDeploymentSpec copies a Deployment's spec, naming the
// Deployment by singular, resource.version.group and plural.
func TestFieldCopyDeploymentSpec(t *testing.T) {
	dyn := fieldCopySetup(t)
	ns := fcNamespace(t, "fc-deploy")
	labels := map[string]string{"app": "web"}
	if _, err := upstreamClients(t).kube.AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := stripNulls(field(t, dyn, deploysGVR, ns, "web", "spec"))
	for name, resource := range map[string]string{"by-singular": "deployment", "by-gvr": "deployments.v1.apps", "by-plural": "deployments"} {
		create(t, dyn, fedDeploys, object(fedDeploys, "FederatedDeployment", ns, name,
			map[string]string{"k8s-copier.fig.org/replace-spec.template.spec": resource + ":web:spec"}, map[string]any{}))
	}
	for _, name := range []string{"by-singular", "by-gvr", "by-plural"} {
		waitField(t, dyn, fedDeploys, ns, name, time.Minute, want, "spec", "template", "spec")
		waitFieldCopy(t, ns, "federateddeployment."+name+".spec.template.spec", "Applied", "spec.template.spec holds spec of deployment")
	}
}

// TestFieldCopyLiteralKeysListAndMerge covers json: literals, a bracketed
// source key, a courier.dev/field-copies rule writing data[ca.crt] of a
// Secret, and merge- merging rather than replacing.
func TestFieldCopyLiteralKeysListAndMerge(t *testing.T) {
	dyn := fieldCopySetup(t)
	ns := fcNamespace(t, "fc-forms")
	grantSecretWrites(t, ns)
	kube := upstreamClients(t).kube
	ctx := context.Background()
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls-src"},
		Data: map[string][]byte{"tls.crt": []byte("CERT"), "ca.crt": []byte("CA")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "merge-src"},
		Data: map[string]string{"over": "new", "add": "y"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns, "fs", map[string]string{
		"k8s-copier.fig.org/replace-spec.template.literal": `json:{"a":1}`,
		"k8s-copier.fig.org/replace-spec.template.cert":    "secret:tls-src:data[tls.crt]",
		"k8s-copier.fig.org/merge-spec.template.merged":    "configmap:merge-src:data",
	}, map[string]any{"template": map[string]any{"merged": map[string]any{"keep": "x", "over": "old"}}}))
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tls-dst", Annotations: map[string]string{
			"courier.dev/field-copies": `[{"to": "data[ca.crt]", "from": "secret:tls-src:data[ca.crt]"}]`}},
		Data: map[string][]byte{"other": []byte("O")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitField(t, dyn, fedSecrets, ns, "fs", time.Minute, map[string]any{
		"literal": map[string]any{"a": int64(1)},
		"cert":    b64("CERT"),
		"merged":  map[string]any{"keep": "x", "over": "new", "add": "y"},
	}, "spec", "template")
	waitField(t, dyn, schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, ns, "tls-dst", 30*time.Second, map[string]any{"other": b64("O"), "ca.crt": b64("CA")}, "data")

	waitFieldCopy(t, ns, "federatedsecret.fs.spec.template.literal", "Applied", "JSON literal")
	waitFieldCopy(t, ns, "federatedsecret.fs.spec.template.cert", "Applied", "data[tls.crt]")
	merged := waitFieldCopy(t, ns, "federatedsecret.fs.spec.template.merged", "Applied", "has merged")
	if merged.Spec.Mode != "Merge" {
		t.Errorf("merge row mode %q", merged.Spec.Mode)
	}
	list := waitFieldCopy(t, ns, "secret.tls-dst.data-ca.crt", "Applied", "")
	if list.Spec.DestinationPath != "data[ca.crt]" || list.Spec.Source == nil || list.Spec.Source.Path != "data[ca.crt]" {
		t.Errorf("field-copies row: %+v", list.Spec)
	}
}

// TestFieldCopyLateSourceCRD names a source kind whose CRD does not exist
// yet: the rule is Invalid, and once the CRD is installed (Courier still
// running) it applies.
func TestFieldCopyLateSourceCRD(t *testing.T) {
	dyn := fieldCopySetup(t)
	ns := fcNamespace(t, "fc-late")
	create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns, "fs",
		map[string]string{"k8s-copier.fig.org/replace-spec.template.gadget": "gadget:g1:spec"}, map[string]any{}))
	waitFieldCopy(t, ns, "federatedsecret.fs.spec.template.gadget", "Invalid", `resource "gadget" is not served`)

	installCRD(t, "late.e2e.courier.dev", "Gadget", "gadgets")
	t.Cleanup(func() {
		_, _ = env.Kubectl(context.Background(), env.Upstream, "delete", "crd", "gadgets.late.e2e.courier.dev")
	})
	create(t, dyn, gadgets, object(gadgets, "Gadget", ns, "g1", nil, map[string]any{"color": "blue"}))
	waitField(t, dyn, fedSecrets, ns, "fs", time.Minute, map[string]any{"color": "blue"}, "spec", "template", "gadget")
	waitFieldCopy(t, ns, "federatedsecret.fs.spec.template.gadget", "Applied", "")
}

// TestFieldCopyRemovedAnnotation removes one of two targets' annotation:
// its row goes, and a later change of the source reaches only the other.
func TestFieldCopyRemovedAnnotation(t *testing.T) {
	dyn := fieldCopySetup(t)
	ns := fcNamespace(t, "fc-remove")
	kube := upstreamClients(t).kube
	ctx := context.Background()
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "src"},
		Data: map[string][]byte{"k": []byte("v1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns, name,
			map[string]string{replaceData: "secret:src:data"}, map[string]any{}))
	}
	v1 := map[string]any{"k": b64("v1")}
	waitField(t, dyn, fedSecrets, ns, "a", time.Minute, v1, "spec", "template", "data")
	waitField(t, dyn, fedSecrets, ns, "b", time.Minute, v1, "spec", "template", "data")

	w, err := upstreamClients(t).courier.CourierV1alpha1().FieldCopies(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=federatedsecret.a.spec.template.data"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	kubectl(t, "annotate", "-n", ns, "federatedsecrets.e2e.courier.dev/a", replaceData+"-")
	waitFieldCopy(t, ns, "federatedsecret.a.spec.template.data", "", "")
	deadline := time.After(10 * time.Second)
	for deleted := false; !deleted; {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch on fieldcopies closed before the row's DELETED event")
			}
			deleted = e.Type == watch.Deleted
		case <-deadline:
			t.Fatal("no DELETED event on a watch of fieldcopies for the removed rule")
		}
	}
	if _, ok := kubectlRows(t)[ns+"/federatedsecret.b.spec.template.data"]; !ok {
		t.Error("kubectl get fieldcopies -A lost the other target's row")
	}

	s, err := kube.CoreV1().Secrets(ns).Get(ctx, "src", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"k": []byte("v2")}
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitField(t, dyn, fedSecrets, ns, "b", 5*time.Second, map[string]any{"k": b64("v2")}, "spec", "template", "data")
	if got := field(t, dyn, fedSecrets, ns, "a", "spec", "template", "data"); !reflect.DeepEqual(got, v1) {
		t.Fatalf("target a changed after its annotation was removed: %v", got)
	}
}

// TestFieldCopyCrossNamespace refuses a source in another namespace with a
// row naming the flag, then restarts Courier with
// --fieldcopy-cross-namespace and sees the copy made.
func TestFieldCopyCrossNamespace(t *testing.T) {
	dyn := fieldCopySetup(t)
	ns1, ns2 := fcNamespace(t, "fc-cross1"), fcNamespace(t, "fc-cross2")
	if _, err := upstreamClients(t).kube.CoreV1().Secrets(ns2).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "src"},
		Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns1, "fs",
		map[string]string{replaceData: "secret:" + ns2 + "/src:data"}, map[string]any{"template": map[string]any{}}))
	waitFieldCopy(t, ns1, "federatedsecret.fs.spec.template.data", "Refused", "cross-namespace sources need --fieldcopy-cross-namespace")
	if got := field(t, dyn, fedSecrets, ns1, "fs", "spec", "template"); !reflect.DeepEqual(got, map[string]any{}) {
		t.Fatalf("a refused rule wrote the target: %v", got)
	}

	courier.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := courier.StartWith(ctx, []string{"--fieldcopy-cross-namespace"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		courier.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := courier.StartWith(ctx, nil); err != nil {
			t.Errorf("restarting Courier without the flag: %v", err)
		}
	})
	waitField(t, dyn, fedSecrets, ns1, "fs", time.Minute, map[string]any{"k": b64("v")}, "spec", "template", "data")
	waitFieldCopy(t, ns1, "federatedsecret.fs.spec.template.data", "Applied", "secret "+ns2+"/src")
}

// TestFieldCopyMalformed gives one target every kind of malformed rule:
// each is an Invalid row with a message and a Warning Event, Courier keeps
// running, and the good rule beside them still applies.
func TestFieldCopyMalformed(t *testing.T) {
	dyn := fieldCopySetup(t)
	ns := fcNamespace(t, "fc-malformed")
	create(t, dyn, fedSecrets, object(fedSecrets, "FederatedSecret", ns, "fs", map[string]string{
		"k8s-copier.fig.org/replace-spec.template.unknown": "widgets:x:data",
		"k8s-copier.fig.org/replace-spec.template.badpath": "secret:s:data[x",
		"k8s-copier.fig.org/replace-spec.template.badjson": "json:{",
		"k8s-copier.fig.org/replace-spec.template.missing": "secret:s",
		"k8s-copier.fig.org/replace-spec.template.good":    `json:"ok"`,
		"courier.dev/field-copies":                         "not json",
	}, map[string]any{}))
	waitField(t, dyn, fedSecrets, ns, "fs", time.Minute, "ok", "spec", "template", "good")
	for name, msg := range map[string]string{
		"federatedsecret.fs.spec.template.unknown":    `resource "widgets" is not served`,
		"federatedsecret.fs.spec.template.badpath":    "never closed",
		"federatedsecret.fs.spec.template.badjson":    "is not valid",
		"federatedsecret.fs.spec.template.missing":    "neither RESOURCE:INSTANCE:SRC-PATH nor json:JSON",
		"federatedsecret.fs.courier.dev-field-copies": "not a JSON list",
	} {
		waitFieldCopy(t, ns, name, "Invalid", msg)
	}
	waitFieldCopy(t, ns, "federatedsecret.fs.spec.template.good", "Applied", "")
	invalid := kubectl(t, "get", "fieldcopies", "-n", ns, "--field-selector", "status.phase=Invalid,spec.target.name=fs", "-o", "name")
	if n := len(strings.Fields(invalid)); n != 5 || strings.Contains(invalid, "good") {
		t.Errorf("--field-selector status.phase=Invalid gave %d rows:\n%s", n, invalid)
	}
	eventually(t, "a FieldCopyInvalid Warning Event on the target", func() (bool, string) {
		list, err := upstreamClients(t).kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=fs,reason=FieldCopyInvalid"})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) > 0, "none"
	})
	if courier.Pid() == 0 {
		t.Fatal("Courier is not running")
	}
}

// TestFieldCopyForbiddenWrite targets a Secret in a namespace where
// Courier may not update Secrets: the row is Failed with the Forbidden
// message, and the write is counted as failed.
func TestFieldCopyForbiddenWrite(t *testing.T) {
	fieldCopySetup(t)
	ns := fcNamespace(t, "fc-forbidden")
	if _, err := upstreamClients(t).kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "dst", Annotations: map[string]string{"k8s-copier.fig.org/replace-data.k": `json:"dg=="`}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFieldCopy(t, ns, "secret.dst.data.k", "Failed", "forbidden")
	row := fieldCopyRow(t, ns, "secret.dst.data.k")
	if !strings.Contains(row.Status.Message, "cannot update resource \"secrets\"") {
		t.Errorf("message does not say which verb and resource: %q", row.Status.Message)
	}
	if m := scrape(t); !strings.Contains(m, `courier_fieldcopy_writes_total{result="failed"}`) {
		t.Error("/metrics lacks courier_fieldcopy_writes_total{result=\"failed\"}")
	}
}
