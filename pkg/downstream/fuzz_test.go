package downstream

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// errBuilt stops build once it has a rest.Config, before any informer.
var errBuilt = errors.New("built")

// FuzzKubeconfig feeds a Cluster's kubeconfig Secret arbitrary bytes. build
// must never panic; a kubeconfig it refuses gives a KubeconfigError (the
// message a row shows) that never quotes the token; and one it accepts must
// not make Courier run a command or read a file of its own (exec,
// auth-provider, token, certificate or CA files), in any context, not only
// the current one.
func FuzzKubeconfig(f *testing.F) {
	f.Add(kubeconfig("https://127.0.0.1:6443"))
	f.Add([]byte(""))
	f.Add([]byte("not: [yaml"))
	f.Add([]byte("{}"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","users":[{"name":"u","user":{"exec":{"command":"sh","apiVersion":"client.authentication.k8s.io/v1"}}}]}`))
	f.Add([]byte("users:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n"))
	f.Add([]byte("clusters:\n- name: c\n  cluster: {server: 'https://x', certificate-authority: /etc/passwd}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {tokenFile: /var/run/secrets/token}\n"))
	f.Add([]byte("current-context: missing\n"))
	// A token (or password) that starts with '*' is a YAML alias: the
	// parser quotes it without the '*', and with only the name's
	// characters ("tok-..." of "*tok-...?x").
	f.Add([]byte("users:\n- name: u\n  user:\n    token: *" + fakeToken + "\n"))
	f.Add([]byte("users:\n- name: u\n  user:\n    token: *" + fakeToken + "?x\n"))
	// A value written with escapes is quoted decoded: "tok\x2d..." is
	// "tok-..." in the message.
	f.Add([]byte(`current-context: "` + strings.Replace(fakeToken, "-", `\x2d`, 1) + `"` + "\n"))
	f.Add([]byte(`{"current-context": "` + strings.Replace(fakeToken, "-", `\u002d`, 1) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var built *rest.Config
		c := &Cache{o: Options{WatchSelector: managed, NewClientset: func(cfg *rest.Config) (Clientset, error) {
			built = cfg
			return nil, errBuilt
		}}}
		_, err := c.build(cluster("ws", "c", "kc", ""), "ws/kc", secret("ws", "kc", "1", map[string][]byte{KubeconfigKey: data}))
		if err == nil {
			t.Fatal("build succeeded with a clientset that always fails")
		}
		var ke *KubeconfigError
		if !errors.As(err, &ke) {
			t.Fatalf("build error %T %v is not a KubeconfigError: rows could not show it", err, err)
		}
		if strings.Contains(ke.Msg, fakeToken) && !strings.Contains(string(data), fakeToken+":") {
			t.Fatalf("message quotes the token: %q", ke.Msg)
		}
		if built == nil {
			return
		}
		switch {
		case built.ExecProvider != nil, built.AuthProvider != nil:
			t.Fatalf("accepted a kubeconfig with a credential plugin: %q", data)
		case built.BearerTokenFile != "", built.CertFile != "", built.KeyFile != "", built.CAFile != "":
			t.Fatalf("accepted a kubeconfig that names a file: %q", data)
		}
	})
}
