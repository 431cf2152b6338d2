package fieldcopy

import (
	"encoding/base64"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
)

// kubeconfigClusters names Clusters by the kubeconfig Secret they read.
type kubeconfigClusters map[string][]string

func (k kubeconfigClusters) KubeconfigOf(namespace, name string) []string {
	return k[exportpolicy.KubeconfigKey(namespace, name)]
}

const canary = "canary-5f0e1d"

var tokenKubeconfig = base64.StdEncoding.EncodeToString([]byte(
	"apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: " + canary + "}\n"))

// TestSecretSourcesOff: without --fieldcopy-secret-sources a Secret source
// is Refused naming the flag, never read, nothing written; a rule from
// another kind on the same target still applies.
func TestSecretSourcesOff(t *testing.T) {
	h := startWith(t, func(cfg *Config) { cfg.Targets, cfg.SecretSources = []string{"federatedsecrets"}, false },
		secret("ns1", "src", map[string]any{"k": "djE="}),
		fed("ns1", "other", nil, map[string]any{"data": map[string]any{"o": "b2s="}}),
		fed("ns1", "fs", map[string]string{
			copyData: "secret:src:data",
			"k8s-copier.fig.org/replace-spec.template.copied": "federatedsecret:other:spec.template.data",
		}, map[string]any{}))
	h.waitRow("ns1", "federatedsecret.fs.spec.template.copied", courier.FieldCopyPhaseApplied, "")
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseRefused, "Secret sources are off; see --fieldcopy-secret-sources")
	if n := h.reads(coreSecrets, "ns1", "src"); n != 0 {
		t.Errorf("the Secret was read %d times", n)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(h.get(fedGVR, "ns1", "fs").Object, "spec", "template", "data"); found {
		t.Error("the Secret's data was written")
	}
}

// TestDeniedSourcesAreRefused: each rule of the export policy refuses a
// field copy from a Secret, naming the rule, with nothing written and no
// value in the row; the ordinary Secret beside them is applied.
func TestDeniedSourcesAreRefused(t *testing.T) {
	optedOut := secret("ns1", "opted-out", map[string]any{"k": b64(canary)})
	optedOut.SetAnnotations(map[string]string{exportpolicy.AnnotationExport: "false"})
	token := secret("ns1", "sa-token", map[string]any{"token": b64(canary)})
	token.Object["type"] = "kubernetes.io/service-account-token"
	rancher := secret("ns1", "cloud", map[string]any{"k": b64(canary)})
	rancher.Object["type"] = "management.cattle.io/cloud-credential"
	cases := []struct {
		source, rule string
		read         bool // whether deciding needs the object read
	}{
		{"d1-kubeconfig", exportpolicy.RuleKubeconfig, false},
		{"opted-out", exportpolicy.RuleExportAnnotation, false},
		{"sa-token", exportpolicy.RuleSecretType, true},
		{"cloud", exportpolicy.RuleSecretType, true},
		{"kc-content", exportpolicy.RuleKubeconfigContent, true},
		{"plain", "", true},
	}
	objs := []runtime.Object{
		secret("ns1", "d1-kubeconfig", map[string]any{"value": tokenKubeconfig}),
		optedOut, token, rancher,
		secret("ns1", "kc-content", map[string]any{"config": tokenKubeconfig}),
		secret("ns1", "plain", map[string]any{"k": "djE="}),
	}
	for _, c := range cases {
		objs = append(objs, fed("ns1", c.source, map[string]string{copyData: "secret:" + c.source + ":data"}, map[string]any{}))
	}
	h := startWith(t, func(cfg *Config) {
		cfg.Targets = []string{"federatedsecrets"}
		cfg.Exports = exportpolicy.New(true, kubeconfigClusters{"ns1/d1-kubeconfig": {"ns1/d1"}})
	}, objs...)
	for _, c := range cases {
		row := "federatedsecret." + c.source + ".spec.template.data"
		if c.rule == "" {
			h.waitRow("ns1", row, courier.FieldCopyPhaseApplied, "holds data of secret ns1/plain")
			continue
		}
		h.waitRow("ns1", row, courier.FieldCopyPhaseRefused, "(rule "+c.rule+")")
		if _, found, _ := unstructured.NestedFieldNoCopy(h.get(fedGVR, "ns1", c.source).Object, "spec", "template", "data"); found {
			t.Errorf("%s: written from a denied source", c.source)
		}
		if n := h.reads(coreSecrets, "ns1", c.source); (n > 0) != c.read {
			t.Errorf("%s: read %d times, want read %v", c.source, n, c.read)
		}
		if _, msg := h.row("ns1", row); strings.Contains(msg, canary) {
			t.Errorf("%s: the row quotes the value: %q", c.source, msg)
		}
	}
	h.ctrl.mu.Lock()
	defer h.ctrl.mu.Unlock()
	for k := range h.ctrl.sourceContent {
		if k.Name != "plain" {
			t.Errorf("Courier holds the content of denied source %s", k)
		}
	}
}

// TestRetractWhenSourceBecomesDenied: a rule applied, then its source is
// annotated courier.dev/export: "false": the row turns Refused and says so,
// and what Courier wrote at the destination (its field manager's fields)
// is removed in the same update; a field another manager wrote stays.
func TestRetractWhenSourceBecomesDenied(t *testing.T) {
	h := startWith(t, func(cfg *Config) { cfg.Targets = []string{"federatedsecrets"} },
		secret("ns1", "src", map[string]any{"k": "djE="}),
		fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{"kept": "x"}))
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "")
	// The fake API server keeps no managedFields: record the ones a real
	// one would, for Courier's write and another manager's.
	fs := h.get(fedGVR, "ns1", "fs")
	fs.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:kept":{}}}}`)}},
		{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:data":{".":{},"f:k":{}}}}}`)}},
	})
	h.update(fedGVR, fs)
	src := h.get(coreSecrets, "ns1", "src")
	src.SetAnnotations(map[string]string{exportpolicy.AnnotationExport: "false"})
	h.update(coreSecrets, src)
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseRefused,
		"what Courier wrote at spec.template.data before is removed from the target")
	h.waitData("ns1", "fs", "map[kept:x]")
}

func TestOwnedUnder(t *testing.T) {
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		dst     string
		want    []string
	}{
		{"leaf", []metav1.ManagedFieldsEntry{entry(fieldManager, `{"f:data":{"f:a":{}}}`)}, "data.a", []string{"data.a"}},
		{"map of leaves", []metav1.ManagedFieldsEntry{entry(fieldManager, `{"f:data":{".":{},"f:a":{},"f:b":{}}}`)}, "data", []string{"data.a", "data.b"}},
		{"another manager's", []metav1.ManagedFieldsEntry{entry("kubectl", `{"f:data":{"f:a":{}}}`)}, "data.a", nil},
		{"not under", []metav1.ManagedFieldsEntry{entry(fieldManager, `{"f:data":{"f:a":{}}}`)}, "data.b", nil},
		{"list whole", []metav1.ManagedFieldsEntry{entry(fieldManager, `{"f:spec":{"f:ports":{"k:{\"port\":80}":{}}}}`)}, "spec.ports", []string{"spec.ports"}},
		{"dotted key", []metav1.ManagedFieldsEntry{entry(fieldManager, `{"f:data":{"f:tls.crt":{}}}`)}, "data[tls.crt]", []string{"data.tls.crt"}},
		{"malformed", []metav1.ManagedFieldsEntry{entry(fieldManager, `{`)}, "data", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst, err := rules.ParsePath(tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ownedUnder(tc.entries, dst) {
				got = append(got, strings.Join(p, "."))
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestBadInputTurnsDenied: a rule edited from an allowed source to a
// denied one, and a Secret deleted and recreated under its name with a
// denied type, are each Refused with their rule's message; what Courier
// wrote from the allowed source is retracted, and no value reaches a row.
func TestBadInputTurnsDenied(t *testing.T) {
	courierOwns := []metav1.ManagedFieldsEntry{{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:data":{".":{},"f:k":{}}}}}`)}}}
	t.Run("rule edited to a denied source", func(t *testing.T) {
		h := startWith(t, func(cfg *Config) {
			cfg.Targets = []string{"federatedsecrets"}
			cfg.Exports = exportpolicy.New(true, nil)
		},
			secret("ns1", "ok", map[string]any{"k": "djE="}),
			secret("ns1", "kc", map[string]any{"config": tokenKubeconfig}),
			fed("ns1", "fs", map[string]string{copyData: "secret:ok:data"}, map[string]any{}))
		h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "")
		fs := h.get(fedGVR, "ns1", "fs")
		fs.SetManagedFields(courierOwns)
		fs.SetAnnotations(map[string]string{copyData: "secret:kc:data"})
		h.update(fedGVR, fs)
		h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseRefused, "(rule kubeconfig-content); nothing is copied from it; what Courier wrote")
		h.waitData("ns1", "fs", "map[]")
		if _, msg := h.row("ns1", "federatedsecret.fs.spec.template.data"); strings.Contains(msg, canary) {
			t.Errorf("the row quotes the value: %q", msg)
		}
	})
	t.Run("secret recreated with a denied type", func(t *testing.T) {
		h := startWith(t, func(cfg *Config) {
			cfg.Targets = []string{"federatedsecrets"}
			cfg.Exports = exportpolicy.New(true, nil)
		},
			secret("ns1", "src", map[string]any{"k": b64(canary)}),
			fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{}))
		h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "")
		fs := h.get(fedGVR, "ns1", "fs")
		fs.SetManagedFields(courierOwns)
		h.update(fedGVR, fs)
		if err := h.client.Tracker().Delete(coreSecrets, "ns1", "src"); err != nil {
			t.Fatal(err)
		}
		h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseSourceMissing, "")
		again := secret("ns1", "src", map[string]any{"token": b64(canary)})
		again.Object["type"] = "kubernetes.io/service-account-token"
		again.SetResourceVersion(h.nextRV())
		if err := h.client.Tracker().Create(coreSecrets, again, "ns1"); err != nil {
			t.Fatal(err)
		}
		h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseRefused, "(rule secret-type)")
		h.waitData("ns1", "fs", "map[]")
	})
}

// TestRetractionThatFailsSaysSo: when the update that would remove what a
// now-denied rule wrote is refused, the row says the value is still in the
// target and why, never that it was removed.
func TestRetractionThatFailsSaysSo(t *testing.T) {
	h := startWith(t, func(cfg *Config) { cfg.Targets = []string{"federatedsecrets"} },
		secret("ns1", "src", map[string]any{"k": "djE="}),
		fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{}))
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "")
	fs := h.get(fedGVR, "ns1", "fs")
	fs.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:data":{"f:k":{}}}}}`)}}})
	h.update(fedGVR, fs)
	h.client.PrependReactor("update", "federatedsecrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(fedGVR.GroupResource(), "fs", errors.New("no update"))
	})
	src := h.get(coreSecrets, "ns1", "src")
	src.SetAnnotations(map[string]string{exportpolicy.AnnotationExport: "false"})
	h.update(coreSecrets, src)
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseRefused,
		"what Courier wrote at spec.template.data before is still in the target: removing it failed: ")
	if _, msg := h.row("ns1", "federatedsecret.fs.spec.template.data"); strings.Contains(msg, "is removed from the target") {
		t.Errorf("the row says removed: %q", msg)
	}
}
