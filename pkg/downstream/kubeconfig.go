package downstream

// What a Cluster's kubeconfig Secret may be, and where it may be read
// from: the checks made before a client is built from one, and the errors
// a status row shows when one is refused.

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// KubeconfigError says why a cluster has no client. Msg is meant for a status row and never
// contains the kubeconfig's content.
type KubeconfigError struct {
	Cluster string // "<namespace>/<name>" of the Cluster
	Msg     string
}

func (e *KubeconfigError) Error() string { return e.Msg }

// The namespaces, besides the Cluster's own, that a kubeconfig Secret may be
// read from (docs/design.md#inputs; Fleet v0.16, rancher/fleet#5224).
var kubeconfigNamespaces = []string{"fleet-local", "fleet-default", fleet.SystemNamespace, "cattle-fleet-clusters-system"}

const kubeconfigNamespacePrefix = "cluster-"

// KubeconfigNamespaceAllowed reports whether a Cluster in clusterNamespace
// may name a kubeconfig Secret in namespace.
func KubeconfigNamespaceAllowed(namespace, clusterNamespace string) bool {
	if namespace == clusterNamespace || strings.HasPrefix(namespace, kubeconfigNamespacePrefix) {
		return true
	}
	for _, n := range kubeconfigNamespaces {
		if namespace == n {
			return true
		}
	}
	return false
}

func kerr(cluster, format string, args ...any) error {
	return &KubeconfigError{Cluster: cluster, Msg: fmt.Sprintf(format, args...)}
}

// build makes a Cluster's client from its kubeconfig Secret s (ref is its
// "<ns>/<name>"). Every error is a KubeconfigError a row may show: the
// parsers' messages are redacted, and a kubeconfig that would run a command
// or read a file in Courier's process is refused before anything is built
// from it.
func (c *Cache) build(cluster *fleet.Cluster, ref string, s *corev1.Secret) (*Client, error) {
	key := cluster.Namespace + "/" + cluster.Name
	data, ok := s.Data[KubeconfigKey]
	if !ok {
		return nil, kerr(key, "kubeconfig Secret %s has no key %q", ref, KubeconfigKey)
	}
	invalid := func(err error) error {
		return kerr(key, "kubeconfig in Secret %s is invalid: %s", ref, redact(err.Error(), data))
	}
	// Check before building: building already reads the files a kubeconfig
	// names.
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, invalid(err)
	}
	if field := unsafeField(raw); field != "" {
		return nil, kerr(key, "kubeconfig in Secret %s is refused: it uses %s, which would make Courier run a command or read a file of its own; embed the credentials instead", ref, field)
	}
	// From the config just parsed, as clientcmd.RESTConfigFromKubeConfig
	// would after parsing it again: building 1,000 new Clusters' clients
	// was 7.7 % of Courier's CPU over a new HelmOp, most of it this YAML
	// parsed twice (docs/benchmarks.md, "A new Cluster's client").
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, "", &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, invalid(err)
	}
	setLimits(cfg, c.o)
	if c.o.NewConfig != nil {
		if cfg, err = c.o.NewConfig(cfg); err != nil {
			return nil, invalid(err)
		}
	}
	return newClient(cluster, cfg, c.o, invalid, &c.sets)
}

// unsafeField names the first part of a kubeconfig that would act inside
// Courier's own process: an exec or auth-provider plugin runs a command
// there, and a file path reads Courier's files (its own ServiceAccount token,
// say) and sends them to whatever server the kubeconfig names. Anyone who
// may write a Cluster's kubeconfig Secret could otherwise take over Courier.
// Every user and cluster entry is checked, not only the current context's.
func unsafeField(cfg *clientcmdapi.Config) string {
	for _, u := range cfg.AuthInfos {
		switch {
		case u.Exec != nil:
			return "an exec credential plugin"
		case u.AuthProvider != nil:
			return "an auth-provider plugin"
		case u.TokenFile != "":
			return "tokenFile"
		case u.ClientCertificate != "" || u.ClientKey != "":
			return "client-certificate or client-key file paths"
		}
	}
	for _, c := range cfg.Clusters {
		if c.CertificateAuthority != "" {
			return "a certificate-authority file path"
		}
	}
	return ""
}
