package exportpolicy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeClusters names Clusters by the kubeconfig Secret they read.
type fakeClusters map[string][]string

func (f fakeClusters) KubeconfigOf(namespace, name string) []string {
	return f[KubeconfigKey(namespace, name)]
}

func TestCheck(t *testing.T) {
	clusters := fakeClusters{"fleet-default/d1-kubeconfig": {"fleet-default/d1"}, "fleet-default/shared": {"fleet-default/a", "fleet-local/b"}}
	optOut := map[string]string{AnnotationExport: "false"}
	for _, tc := range []struct {
		name      string
		denyList  bool
		src       Source
		rule      string
		mentioned []string
	}{
		{"ordinary secret", true, Source{Kind: "Secret", Namespace: "fleet-default", Name: "app", Type: corev1.SecretTypeOpaque}, "", nil},
		{"tls secret", true, Source{Kind: "Secret", Namespace: "fleet-default", Name: "app", Type: corev1.SecretTypeTLS}, "", nil},
		{"configmap", true, Source{Kind: "ConfigMap", Namespace: "fleet-default", Name: "d1-kubeconfig"}, "", nil},
		{"kubeconfig of a cluster", true, Source{Kind: "Secret", Namespace: "fleet-default", Name: "d1-kubeconfig", Type: corev1.SecretTypeOpaque},
			RuleKubeconfig, []string{"Secret fleet-default/d1-kubeconfig", "Cluster fleet-default/d1"}},
		{"kubeconfig of two clusters", true, Source{Kind: "Secret", Namespace: "fleet-default", Name: "shared"},
			RuleKubeconfig, []string{"Clusters fleet-default/a, fleet-local/b"}},
		{"same name, another namespace", true, Source{Kind: "Secret", Namespace: "team", Name: "d1-kubeconfig"}, "", nil},
		{"service account token", true, Source{Kind: "Secret", Namespace: "ns", Name: "t", Type: corev1.SecretTypeServiceAccountToken},
			RuleSecretType, []string{"kubernetes.io/service-account-token"}},
		{"bootstrap token", true, Source{Kind: "Secret", Namespace: "ns", Name: "t", Type: corev1.SecretTypeBootstrapToken}, RuleSecretType, nil},
		{"helm release", true, Source{Kind: "Secret", Namespace: "ns", Name: "sh.helm.release.v1.x.v1", Type: "helm.sh/release.v1"}, RuleSecretType, nil},
		{"fleet bundle deployment options", true, Source{Kind: "Secret", Namespace: "ns", Name: "bd", Type: "fleet.cattle.io/bundle-deployment/v1alpha1"}, RuleSecretType, nil},
		{"any fleet type", true, Source{Kind: "Secret", Namespace: "ns", Name: "x", Type: "fleet.cattle.io/bundle-helmops-access/v1alpha1"}, RuleSecretType, nil},
		{"fleet-like but not fleet", true, Source{Kind: "Secret", Namespace: "ns", Name: "x", Type: "example.com/fleet.cattle.io"}, "", nil},
		{"opt-out secret", true, Source{Kind: "Secret", Namespace: "ns", Name: "x", Annotations: optOut}, RuleExportAnnotation, []string{`courier.dev/export: "false"`}},
		{"opt-out configmap", true, Source{Kind: "ConfigMap", Namespace: "ns", Name: "x", Annotations: map[string]string{AnnotationExport: "False"}}, RuleExportAnnotation, nil},
		{"export true is no opt-out", true, Source{Kind: "ConfigMap", Namespace: "ns", Name: "x", Annotations: map[string]string{AnnotationExport: "true"}}, "", nil},
		{"deny list off: kubeconfig", false, Source{Kind: "Secret", Namespace: "fleet-default", Name: "d1-kubeconfig"}, "", nil},
		{"deny list off: token", false, Source{Kind: "Secret", Namespace: "ns", Name: "t", Type: corev1.SecretTypeServiceAccountToken}, "", nil},
		{"deny list off: opt-out still holds", false, Source{Kind: "Secret", Namespace: "ns", Name: "x", Annotations: optOut}, RuleExportAnnotation, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := New(tc.denyList, clusters).Check(tc.src)
			if v.Rule != tc.rule || v.Denied() != (tc.rule != "") {
				t.Fatalf("rule %q (denied %v), want %q: %s", v.Rule, v.Denied(), tc.rule, v.Message)
			}
			if tc.rule != "" && !strings.Contains(v.Message, tc.rule) {
				t.Errorf("message %q does not name the rule %s", v.Message, tc.rule)
			}
			for _, m := range tc.mentioned {
				if !strings.Contains(v.Message, m) {
					t.Errorf("message %q does not mention %q", v.Message, m)
				}
			}
		})
	}
}

func TestNilPolicyHonoursOnlyTheAnnotation(t *testing.T) {
	var p *Policy
	if v := p.Check(Source{Kind: "Secret", Type: corev1.SecretTypeServiceAccountToken}); v.Denied() {
		t.Errorf("a nil policy denied a token: %s", v.Message)
	}
	if v := p.Check(Source{Kind: "Secret", Annotations: map[string]string{AnnotationExport: "false"}}); !v.Denied() {
		t.Error("a nil policy exported an opted-out source")
	}
}

func TestGuard(t *testing.T) {
	p := New(true, fakeClusters{"ns/kc": {"ns/c"}})
	canary := "canary-secret-value"
	for _, tc := range []struct {
		name   string
		obj    interface{ GetName() string }
		denied bool
	}{
		{"ordinary secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string][]byte{"k": []byte(canary)}}, false},
		{"kubeconfig", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kc"}, Data: map[string][]byte{"value": []byte(canary)}}, true},
		{"token", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t"}, Type: corev1.SecretTypeServiceAccountToken,
			Data: map[string][]byte{"token": []byte(canary)}}, true},
		{"configmap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kc"}, Data: map[string]string{"k": canary}}, false},
		{"opted-out configmap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Annotations: map[string]string{AnnotationExport: "false"}},
			Data: map[string]string{"k": canary}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch o := tc.obj.(type) {
			case *corev1.Secret:
				err = p.Guard(o)
			case *corev1.ConfigMap:
				err = p.Guard(o)
			}
			v, denied := IsDenied(err)
			if denied != tc.denied || (err != nil) != tc.denied {
				t.Fatalf("Guard = %v (denied %v), want denied %v", err, denied, tc.denied)
			}
			if denied && (!v.Denied() || strings.Contains(err.Error(), canary)) {
				t.Errorf("verdict %+v; error %q must deny and never hold the data", v, err)
			}
		})
	}
}

func TestDeniedType(t *testing.T) {
	for typ, want := range map[corev1.SecretType]bool{
		corev1.SecretTypeOpaque:                       false,
		corev1.SecretTypeTLS:                          false,
		corev1.SecretTypeServiceAccountToken:          true,
		"fleet.cattle.io/cluster-registration-values": true,
		"management.cattle.io/cloud-credential":       true,
		"provisioning.cattle.io/cluster-state":        true,
		"cattle.io/anything":                          true,
		"rke.cattle.io/machine-state":                 true,
		"notcattle.io/x":                              false,
		"example.com/fleet.cattle.io":                 false,
		"cattle.io":                                   false,
	} {
		if got := DeniedType(typ); got != want {
			t.Errorf("DeniedType(%q) = %v, want %v", typ, got, want)
		}
	}
}
