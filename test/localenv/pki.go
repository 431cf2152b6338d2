package localenv

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/courier-dev/courier/pkg/pki"
)

// certValidity is long enough for any test run or a `make run` session and
// short enough that nobody mistakes these certificates for real ones.
const certValidity = 30 * 24 * time.Hour

// newCA makes a certificate authority for a test cluster, valid for
// certValidity.
func newCA(commonName string) (*pki.KeyPair, error) {
	return pki.NewCA(commonName, time.Now(), certValidity)
}

// writeKeyPair stores kp as <dir>/<base>.crt and <dir>/<base>.key (0600)
// and returns both paths.
func writeKeyPair(kp *pki.KeyPair, dir, base string) (certPath, keyPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	certPath = filepath.Join(dir, base+".crt")
	keyPath = filepath.Join(dir, base+".key")
	if err := os.WriteFile(certPath, kp.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, kp.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// writePublicKey stores the public half of key as a PEM "PUBLIC KEY" block,
// the form --service-account-key-file documents.
func writePublicKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// clientCertConfig returns a rest.Config that authenticates to server with
// a client certificate and trusts caPEM for the server's certificate.
func clientCertConfig(server string, caPEM []byte, client *pki.KeyPair) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: client.CertPEM,
			KeyData:  client.KeyPEM,
		},
		// Tests create many objects in a burst; client-go's default 5 QPS
		// would make them slow for no benefit against a private server.
		QPS:   100,
		Burst: 200,
	}
}

// writeKubeconfig writes cfg (client certificate or bearer token, all data
// embedded so the file can be copied into a Secret) as a kubeconfig with one
// context named name.
func writeKubeconfig(path, name string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}
