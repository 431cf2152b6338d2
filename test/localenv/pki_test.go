package localenv

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

func mustCA(t *testing.T, name string) *keyPair {
	t.Helper()
	ca, err := newCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// TestServingCertSANs checks that a serving certificate verifies for every
// name a client uses (the aggregator uses <service>.<namespace>.svc) and
// for nothing else.
func TestServingCertSANs(t *testing.T) {
	ca := mustCA(t, "test-ca")
	leaf, err := ca.issue(certSpec{
		CommonName: "courier-api.courier-system.svc",
		DNSNames:   []string{"courier-api.courier-system.svc", "localhost"},
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1)},
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		host    string
		wantErr bool
	}{
		{"service name the aggregator checks", "courier-api.courier-system.svc", false},
		{"localhost", "localhost", false},
		{"loopback IP", "127.0.0.1", false},
		{"other service", "api.courier-system.svc", true},
		{"other IP", "10.0.0.1", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := leaf.Cert.Verify(x509.VerifyOptions{
				DNSName:   tc.host,
				Roots:     poolOf(ca.Cert),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Verify(%s) error = %v, wantErr %v", tc.host, err, tc.wantErr)
			}
		})
	}
}

// TestChainVerification checks which roots and usages a certificate
// verifies against: a certificate of one cluster must not work on another.
func TestChainVerification(t *testing.T) {
	ca := mustCA(t, "cluster-a-ca")
	other := mustCA(t, "cluster-b-ca")
	client, err := ca.issue(certSpec{CommonName: "alice", Organization: []string{"dev", "ops"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.issue(certSpec{CommonName: "kube-apiserver", DNSNames: []string{"kubernetes"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cert    *x509.Certificate
		roots   *x509.CertPool
		usage   x509.ExtKeyUsage
		wantErr bool
	}{
		{"client cert, own CA", client.Cert, poolOf(ca.Cert), x509.ExtKeyUsageClientAuth, false},
		{"client cert, other cluster's CA", client.Cert, poolOf(other.Cert), x509.ExtKeyUsageClientAuth, true},
		{"client cert used for serving", client.Cert, poolOf(ca.Cert), x509.ExtKeyUsageServerAuth, true},
		{"serving cert, own CA", server.Cert, poolOf(ca.Cert), x509.ExtKeyUsageServerAuth, false},
		{"serving cert used as client", server.Cert, poolOf(ca.Cert), x509.ExtKeyUsageClientAuth, true},
		{"CA is self-signed root", ca.Cert, poolOf(ca.Cert), x509.ExtKeyUsageAny, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cert.Verify(x509.VerifyOptions{Roots: tc.roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Verify error = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
	if client.Cert.Subject.CommonName != "alice" || !slices.Equal(client.Cert.Subject.Organization, []string{"dev", "ops"}) {
		t.Errorf("client subject = %v, want CN=alice O=[dev ops] (user and groups for Kubernetes)", client.Cert.Subject)
	}
	if !bytes.Equal(client.Cert.AuthorityKeyId, ca.Cert.SubjectKeyId) || len(ca.Cert.SubjectKeyId) == 0 {
		t.Errorf("authority key id %x does not match CA subject key id %x", client.Cert.AuthorityKeyId, ca.Cert.SubjectKeyId)
	}
}

// TestPEMRoundTrip checks that written files are what Kubernetes flags read:
// the certificate parses, the key parses and matches it.
func TestPEMRoundTrip(t *testing.T) {
	ca := mustCA(t, "ca")
	leaf, err := ca.issue(certSpec{CommonName: "x", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, kp := range []*keyPair{ca, leaf} {
		certPath, keyPath, err := kp.write(dir, kp.Cert.Subject.CommonName)
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
	client, err := ca.issue(certSpec{CommonName: "admin", Organization: []string{"system:masters"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
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
