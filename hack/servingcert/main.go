// Command servingcert makes the serving certificate that the kube-apiserver's
// aggregator needs to trust Courier, for installs from the plain manifests in
// artifacts/ (the Helm chart makes its own). Plain manifests cannot carry a
// freshly generated CA, so this writes two manifests to apply next to them:
//
//	go run ./hack/servingcert -out _output/servingcert
//	kubectl apply -f _output/servingcert/
//
// serving-cert-secret.yaml is the kubernetes.io/tls Secret
// courier-serving-cert that the Deployment mounts (tls.crt, tls.key, and
// ca.crt); apiservice.yaml is artifacts/apiservice.yaml with the caBundle
// filled in. The CA's private key is discarded: rotating means running this
// again and applying both files (docs/upgrade.md).
package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"text/template"
	"time"
)

// options are the command line.
type options struct {
	namespace  string
	service    string
	secretName string
	out        string
	validity   time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.namespace, "namespace", "courier-system", "namespace Courier runs in (the Service's and the Secret's)")
	flag.StringVar(&o.service, "service", "courier-api", "name of Courier's Service; the certificate is for <service>.<namespace>.svc")
	flag.StringVar(&o.secretName, "secret-name", "courier-serving-cert", "name of the TLS Secret the Deployment mounts")
	flag.StringVar(&o.out, "out", "", "directory to write serving-cert-secret.yaml and apiservice.yaml to (created if missing)")
	flag.DurationVar(&o.validity, "validity", 365*24*time.Hour, "how long the CA and serving certificate are valid")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "servingcert:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.out == "" {
		return errors.New("-out is required: the directory to write the manifests to")
	}
	if o.validity < time.Hour {
		return fmt.Errorf("-validity %s is too short to install with", o.validity)
	}
	b, err := generate(o, time.Now())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	secretPath := filepath.Join(o.out, "serving-cert-secret.yaml")
	// The Secret holds the serving key: readable by its owner only.
	if err := os.WriteFile(secretPath, b.secret, 0o600); err != nil {
		return err
	}
	apiServicePath := filepath.Join(o.out, "apiservice.yaml")
	if err := os.WriteFile(apiServicePath, b.apiService, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s (certificate for %s, valid until %s)\n",
		secretPath, apiServicePath, b.dnsNames[0], b.notAfter.UTC().Format(time.RFC3339))
	return nil
}

// bundle is what generate makes.
type bundle struct {
	secret     []byte
	apiService []byte
	dnsNames   []string
	notAfter   time.Time
}

// generate makes a CA and a serving certificate signed by it, and renders
// both manifests.
func generate(o options, now time.Time) (*bundle, error) {
	// The aggregator dials <service>.<namespace>.svc and checks that name;
	// the other two let in-cluster clients use the shorter forms.
	dnsNames := []string{
		fmt.Sprintf("%s.%s.svc", o.service, o.namespace),
		fmt.Sprintf("%s.%s.svc.cluster.local", o.service, o.namespace),
		fmt.Sprintf("%s.%s", o.service, o.namespace),
	}
	notBefore := now.Add(-time.Hour) // tolerate small clock skew between nodes
	notAfter := now.Add(o.validity)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caSKI, err := subjectKeyID(caKey.Public())
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("courier-ca@%d", now.Unix())},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          caSKI,
	}
	caDER, err := createCertificate(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
	}
	der, err := createCertificate(tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	enc := base64.StdEncoding.EncodeToString
	data := map[string]string{
		"Namespace":  o.namespace,
		"Service":    o.service,
		"SecretName": o.secretName,
		"Host":       dnsNames[0],
		"NotAfter":   notAfter.UTC().Format(time.RFC3339),
		"CA":         enc(caPEM),
		"Cert":       enc(certPEM),
		"Key":        enc(keyPEM),
	}
	b := &bundle{dnsNames: dnsNames, notAfter: notAfter}
	if b.secret, err = render(secretTemplate, data); err != nil {
		return nil, err
	}
	if b.apiService, err = render(apiServiceTemplate, data); err != nil {
		return nil, err
	}
	return b, nil
}

func createCertificate(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

// subjectKeyID follows RFC 5280 §4.2.1.2 (1): SHA-1 of the public key bits.
// Go copies it into the AuthorityKeyId of the certificates the CA signs.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha1.Sum(der)
	return sum[:], nil
}

func render(t *template.Template, data map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var secretTemplate = template.Must(template.New("secret").Parse(`# Generated by hack/servingcert: Courier's serving certificate for
# {{.Host}} (valid until {{.NotAfter}}), mounted by
# artifacts/deployment.yaml. Holds a private key: do not commit it.
apiVersion: v1
kind: Secret
metadata:
  name: {{.SecretName}}
  namespace: {{.Namespace}}
  labels:
    app.kubernetes.io/name: courier
    app.kubernetes.io/part-of: courier
type: kubernetes.io/tls
data:
  ca.crt: {{.CA}}
  tls.crt: {{.Cert}}
  tls.key: {{.Key}}
`))

var apiServiceTemplate = template.Must(template.New("apiservice").Parse(`# Generated by hack/servingcert: artifacts/apiservice.yaml with the caBundle
# of the CA that signed the certificate in serving-cert-secret.yaml. Apply
# both together.
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.courier.dev
  labels:
    app.kubernetes.io/name: courier
    app.kubernetes.io/part-of: courier
spec:
  group: courier.dev
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service:
    namespace: {{.Namespace}}
    name: {{.Service}}
    port: 443
  caBundle: {{.CA}}
`))
