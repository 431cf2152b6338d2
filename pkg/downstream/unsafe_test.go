package downstream

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestUnsafeKubeconfigsAreRefused(t *testing.T) {
	base := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"CLUSTER}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {USER}}]
`
	tests := []struct {
		name, cluster, user, want string
	}{
		{name: "embedded token is fine", user: `token: abc`},
		{name: "exec plugin", user: `exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "id"], interactiveMode: Never}`, want: "exec credential plugin"},
		{name: "auth provider", user: `auth-provider: {name: oidc, config: {idp-issuer-url: "https://x"}}`, want: "auth-provider"},
		{name: "token file", user: `tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token`, want: "tokenFile"},
		{name: "client key file", user: `client-certificate: /etc/c.crt, client-key: /etc/c.key`, want: "client-key file"},
		{name: "ca file", cluster: `, certificate-authority: /etc/ca.crt`, user: `token: abc`, want: "certificate-authority file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc := strings.ReplaceAll(strings.ReplaceAll(base, "CLUSTER", tc.cluster), "USER", tc.user)
			cfg, err := clientcmd.Load([]byte(kc))
			if err != nil {
				t.Fatalf("parsing: %v", err)
			}
			got := unsafeField(cfg)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("unsafeField = %q, want one containing %q", got, tc.want)
			}
		})
	}
}
