package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"
)

func mustCA(t *testing.T, name string) *KeyPair {
	t.Helper()
	ca, err := NewCA(name, time.Now(), 30*24*time.Hour)
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
	leaf, err := ca.Issue(CertSpec{
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
	client, err := ca.Issue(CertSpec{CommonName: "alice", Organization: []string{"dev", "ops"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(CertSpec{CommonName: "kube-apiserver", DNSNames: []string{"kubernetes"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
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

// TestValidity checks the window both tools rely on: from an hour before
// now (nodes' clocks differ a little) to now+validity, the leaf no longer
// than its CA.
func TestValidity(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("ca", now, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(CertSpec{CommonName: "x", DNSNames: []string{"x"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kp := range []*KeyPair{ca, leaf} {
		if !kp.Cert.NotBefore.Equal(now.Add(-time.Hour).Truncate(time.Second)) || !kp.Cert.NotAfter.Equal(now.Add(48*time.Hour).Truncate(time.Second)) {
			t.Errorf("%s valid %s to %s, want %s to %s", kp.Cert.Subject.CommonName, kp.Cert.NotBefore, kp.Cert.NotAfter, now.Add(-time.Hour), now.Add(48*time.Hour))
		}
	}
	pool := poolOf(ca.Cert)
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{DNSName: "x", Roots: pool, CurrentTime: now.Add(49 * time.Hour)}); err == nil {
		t.Error("leaf still valid after the CA's validity")
	}
	if _, err := ca.Issue(CertSpec{CommonName: "no usage"}); err == nil {
		t.Error("issued a certificate without an extended key usage")
	}
}

// TestPEM checks that the PEM forms are a key pair Go's TLS stack and the
// Kubernetes flags load, and that serial numbers differ.
func TestPEM(t *testing.T) {
	ca := mustCA(t, "ca")
	leaf, err := ca.Issue(CertSpec{CommonName: "x", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kp := range []*KeyPair{ca, leaf} {
		if _, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
			t.Errorf("%s: CertPEM and KeyPEM do not form a key pair: %v", kp.Cert.Subject.CommonName, err)
		}
		if !bytes.HasPrefix(kp.KeyPEM, []byte("-----BEGIN EC PRIVATE KEY-----")) {
			t.Errorf("%s: key PEM is not an EC PRIVATE KEY block", kp.Cert.Subject.CommonName)
		}
	}
	if ca.Cert.SerialNumber.Cmp(leaf.Cert.SerialNumber) == 0 {
		t.Error("the CA and its leaf have the same serial number")
	}
}
