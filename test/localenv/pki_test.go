package localenv

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/courier-dev/courier/pkg/pki"
)

func mustCA(t *testing.T, name string) *pki.KeyPair {
	t.Helper()
	ca, err := newCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestPEMRoundTrip checks that written files are what Kubernetes flags read:
// the certificate parses, the key parses and matches it.
func TestPEMRoundTrip(t *testing.T) {
	ca := mustCA(t, "ca")
	leaf, err := ca.Issue(pki.CertSpec{CommonName: "x", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, kp := range []*pki.KeyPair{ca, leaf} {
		certPath, keyPath, err := writeKeyPair(kp, dir, kp.Cert.Subject.CommonName)
		if err != nil {
			t.Fatal(err)
		}
		certs, err := certutil.CertsFromFile(certPath)
		if err != nil || len(certs) != 1 || !certs[0].Equal(kp.Cert) {
			t.Fatalf("CertsFromFile(%s) = %v, %v", certPath, certs, err)
		}
		if _, err := keyutil.PrivateKeyFromFile(keyPath); err != nil {
			t.Fatalf("PrivateKeyFromFile: %v", err)
		}
		if st, _ := os.Stat(keyPath); st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", keyPath, st.Mode().Perm())
		}
		if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
			t.Fatalf("key does not match certificate: %v", err)
		}
	}
	pub := filepath.Join(dir, "sa.pub")
	if err := writePublicKey(pub, leaf.Key); err != nil {
		t.Fatal(err)
	}
	if keys, err := keyutil.PublicKeysFromFile(pub); err != nil || len(keys) != 1 {
		t.Fatalf("PublicKeysFromFile = %v, %v", keys, err)
	}
}

// TestKubeconfigRoundTrip checks that a written kubeconfig loads back into
// the same credentials, with data embedded (it is copied into Secrets).
func TestKubeconfigRoundTrip(t *testing.T) {
	ca := mustCA(t, "ca")
	client, err := ca.Issue(pki.CertSpec{CommonName: "admin", Organization: []string{"system:masters"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  *rest.Config
	}{
		{"client certificate", clientCertConfig("https://127.0.0.1:6443", ca.CertPEM, client)},
		{"bearer token", &rest.Config{Host: "https://127.0.0.1:6444", BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "kubeconfig")
			if err := writeKubeconfig(path, "c", tc.cfg); err != nil {
				t.Fatal(err)
			}
			got, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != tc.cfg.Host || !bytes.Equal(got.CAData, tc.cfg.CAData) ||
				!bytes.Equal(got.CertData, tc.cfg.CertData) || !bytes.Equal(got.KeyData, tc.cfg.KeyData) ||
				got.BearerToken != tc.cfg.BearerToken {
				t.Errorf("loaded config differs: host %q token %q", got.Host, got.BearerToken)
			}
		})
	}
}

func TestMajorMinor(t *testing.T) {
	tests := []struct{ version, major, minor string }{
		{"v0.1.0-alpha.0+a36cda9", "0", "1"},
		{"v0.3.2-4-gabcdef0", "0", "3"},
		{"v1.12.0", "1", "12"},
		{"a36cda9-dirty", "0", "1"},
	}
	for _, tc := range tests {
		if major, minor := majorMinor(tc.version); major != tc.major || minor != tc.minor {
			t.Errorf("majorMinor(%q) = %s, %s; want %s, %s", tc.version, major, minor, tc.major, tc.minor)
		}
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b bytes.Buffer
	for i := range 100 {
		b.WriteString("line ")
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString("\n")
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got := Tail(path, 3)
	if want := "line t\nline u\nline v"; got != want {
		t.Errorf("Tail = %q, want %q", got, want)
	}
}

func TestFileSafe(t *testing.T) {
	if got := fileSafe("system:serviceaccount:ns/sa x"); got != "system_serviceaccount_ns_sa_x" {
		t.Errorf("fileSafe = %q", got)
	}
}
