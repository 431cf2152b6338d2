// Package pki issues the certificates Courier's tools make for themselves:
// hack/servingcert's CA and serving certificate for installs from the plain
// manifests, and test/localenv's CAs, serving and client certificates for
// its clusters. One issuer, so that both get the same keys (ECDSA P-256:
// fast to generate, accepted by every Kubernetes flag that takes a key
// file), serial numbers and key identifiers. Courier's own binaries issue
// no certificates.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// clockSkew is how long before it is made a certificate is valid from, so
// that a node whose clock is a little behind accepts it.
const clockSkew = time.Hour

// KeyPair is a certificate with its private key, parsed and in PEM form.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte // "CERTIFICATE"
	KeyPEM  []byte // "EC PRIVATE KEY"
}

// CertSpec describes a leaf certificate to issue.
type CertSpec struct {
	CommonName   string
	Organization []string // for client certificates: the user's groups
	DNSNames     []string
	IPs          []net.IP
	Usages       []x509.ExtKeyUsage // at least one
}

// NewKey returns a fresh ECDSA P-256 key.
func NewKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// NewCA makes a self-signed certificate authority valid from an hour
// before now (clock skew) until now+validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*KeyPair, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	ski, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          ski,
	}
	return sign(tmpl, tmpl, key, key)
}

// Issue signs a leaf certificate for spec with ca, valid as long as ca
// is: a leaf never outlives the CA that vouches for it.
func (ca *KeyPair) Issue(spec CertSpec) (*KeyPair, error) {
	if len(spec.Usages) == 0 {
		return nil, fmt.Errorf("certificate %q: no extended key usage", spec.CommonName)
	}
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:   ca.Cert.NotBefore,
		NotAfter:    ca.Cert.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: spec.Usages,
		DNSNames:    spec.DNSNames,
		IPAddresses: spec.IPs,
	}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

// sign signs tmpl with parentKey under a random 127-bit serial number.
func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (*KeyPair, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
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
