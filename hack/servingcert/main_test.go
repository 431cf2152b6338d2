package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// TestGenerate decodes both manifests as the API server would and checks
// what the aggregator and Courier rely on: the serving certificate verifies
// against the APIService's caBundle for <service>.<namespace>.svc, and its
// key matches it.
func TestGenerate(t *testing.T) {
	o := options{namespace: "ops", service: "courier-api", secretName: "courier-serving-cert", validity: 48 * time.Hour}
	now := time.Now()
	b, err := generate(o, now)
	if err != nil {
		t.Fatal(err)
	}

	var secret corev1.Secret
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b.secret), 4096).Decode(&secret); err != nil {
		t.Fatalf("Secret manifest does not decode: %v\n%s", err, b.secret)
	}
	if secret.Kind != "Secret" || secret.Name != "courier-serving-cert" || secret.Namespace != "ops" || secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret is %s %s/%s of type %s", secret.Kind, secret.Namespace, secret.Name, secret.Type)
	}
	if _, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"]); err != nil {
		t.Errorf("tls.crt and tls.key do not form a key pair: %v", err)
	}

	var api unstructured.Unstructured
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b.apiService), 4096).Decode(&api.Object); err != nil {
		t.Fatalf("APIService manifest does not decode: %v\n%s", err, b.apiService)
	}
	caB64, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle")
	caPEM, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		t.Fatalf("caBundle is not base64: %v", err)
	}
	if !bytes.Equal(caPEM, secret.Data["ca.crt"]) {
		t.Error("the APIService's caBundle is not the Secret's ca.crt")
	}
	if ns, _, _ := unstructured.NestedString(api.Object, "spec", "service", "namespace"); ns != "ops" {
		t.Errorf("APIService points at namespace %q, want ops", ns)
	}

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("caBundle holds no PEM certificate")
	}
	leaf, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host    string
		wantErr bool
	}{
		{"courier-api.ops.svc", false},
		{"courier-api.ops.svc.cluster.local", false},
		{"courier-api.courier-system.svc", true},
	} {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if (err != nil) != tc.wantErr {
			t.Errorf("verify for %s: err=%v, want error: %v", tc.host, err, tc.wantErr)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "courier-api.ops.svc", Roots: pool, CurrentTime: now.Add(49 * time.Hour)}); err == nil {
		t.Error("certificate still valid after -validity")
	}
}

func TestRunNeedsOut(t *testing.T) {
	err := run(options{namespace: "courier-system", service: "courier-api", secretName: "s", validity: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "-out is required") {
		t.Fatalf("run without -out: %v", err)
	}
}
