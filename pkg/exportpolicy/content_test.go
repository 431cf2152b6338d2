package exportpolicy

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const kubeconfigHead = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.1:6443"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`

func TestCarriesKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		want  bool
	}{
		{"token", kubeconfigHead + "users:\n- name: u\n  user: {token: canary}\n", true},
		{"token file", kubeconfigHead + "users:\n- name: u\n  user: {tokenFile: /var/run/t}\n", true},
		{"client key data", kubeconfigHead + "users:\n- name: u\n  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}\n", true},
		{"client key file", kubeconfigHead + "users:\n- name: u\n  user: {client-key: /k.pem}\n", true},
		{"basic auth", kubeconfigHead + "users:\n- name: u\n  user: {username: a, password: b}\n", true},
		{"exec", kubeconfigHead + "users:\n- name: u\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}\n", true},
		{"auth provider", kubeconfigHead + "users:\n- name: u\n  user:\n    auth-provider: {name: oidc}\n", true},
		{"json", `{"kind":"Config","users":[{"name":"u","user":{"token":"canary"}}]}`, true},
		{"second user", kubeconfigHead + "users:\n- name: a\n  user: {}\n- name: b\n  user: {token: t}\n", true},
		{"no credentials", kubeconfigHead + "users:\n- name: u\n  user: {}\n", false},
		{"certificate only", kubeconfigHead + "users:\n- name: u\n  user: {client-certificate-data: Y2VydA==}\n", false},
		{"no users", kubeconfigHead, false},
		{"plain text naming users", "users: are people", false},
		{"binary", "\x00\x01users\xff", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{"other": []byte("plain"), "value": []byte(tc.value)}
			if got := CarriesKubeconfig(data); got != tc.want {
				t.Errorf("CarriesKubeconfig = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGuardKubeconfigContent(t *testing.T) {
	withToken := []byte(kubeconfigHead + "users:\n- name: u\n  user: {token: canary-8d2f}\n")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kc"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"config": withToken}}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": "ns", "name": "kc"}, "type": "Opaque",
		"data": map[string]any{"config": base64.StdEncoding.EncodeToString(withToken)}}}
	rancher := u.DeepCopy()
	rancher.Object["type"] = "management.cattle.io/cloud-credential"
	rancher.Object["data"] = map[string]any{"x": "eA=="}
	optOut := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "ns", "name": "d", "annotations": map[string]any{AnnotationExport: "false"}}}}
	plain := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "ns", "name": "d"}}}
	on, off := New(true, nil), New(false, nil)
	for _, tc := range []struct {
		name string
		err  error
		rule string
	}{
		{"typed, deny list on", on.Guard(secret), RuleKubeconfigContent},
		{"typed, deny list off", off.Guard(secret), ""},
		{"unstructured", on.GuardUnstructured(u), RuleKubeconfigContent},
		{"unstructured, deny list off", off.GuardUnstructured(u), ""},
		{"rancher type", on.GuardUnstructured(rancher), RuleSecretType},
		{"opted-out deployment", off.GuardUnstructured(optOut), RuleExportAnnotation},
		{"plain deployment", on.GuardUnstructured(plain), ""},
	} {
		v, denied := IsDenied(tc.err)
		if v.Rule != tc.rule || denied != (tc.rule != "") {
			t.Errorf("%s: rule %q (err %v), want %q", tc.name, v.Rule, tc.err, tc.rule)
		}
		if tc.err != nil && containsAny(tc.err.Error(), "canary", "8d2f") {
			t.Errorf("%s: the error quotes the Secret's data: %v", tc.name, tc.err)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
