package server

import (
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/server/healthz"
)

// frontProxyReadyCheck is the readyz check "courier-front-proxy-trusted":
// it fails until Courier trusts the aggregator, i.e. until the front-proxy
// (request-header) client CA and the X-Remote-User header names from
// kube-system/extension-apiserver-authentication are loaded.
//
// Why: k8s.io/apiserver starts serving before that ConfigMap's informer has
// synced (the CA controller's RunOnce reads an empty lister and ignores the
// miss). Until then a request the aggregator proxies carries a client
// certificate nobody verifies, so it is authenticated as system:anonymous
// and answered 403: after a restart, a user's first `kubectl get
// downstreamcopies` could be refused. Not ready keeps the Pod out of the
// Service until the trust is in place.
//
// cfg is nil when Courier does not authenticate the aggregator at all
// (--authentication-skip-lookup without --requestheader-client-ca-file):
// then there is nothing to wait for.
func frontProxyReadyCheck(cfg *authenticatorfactory.RequestHeaderConfig) healthz.HealthChecker {
	return healthz.NamedCheck("courier-front-proxy-trusted", func(*http.Request) error {
		if cfg == nil {
			return nil
		}
		if _, ok := cfg.CAContentProvider.VerifyOptions(); !ok {
			return fmt.Errorf("the front-proxy client CA (requestheader-client-ca-file of configmap %s) is not loaded yet: "+
				"requests through the aggregator would be anonymous", authConfigMap)
		}
		if cfg.UsernameHeaders == nil || len(cfg.UsernameHeaders.Value()) == 0 {
			return fmt.Errorf("the front-proxy user headers (requestheader-username-headers of configmap %s) are not loaded yet: "+
				"requests through the aggregator would be anonymous", authConfigMap)
		}
		return nil
	})
}

// authConfigMap is where the upstream kube-apiserver publishes how
// extension API servers authenticate its aggregator.
const authConfigMap = "kube-system/extension-apiserver-authentication"
