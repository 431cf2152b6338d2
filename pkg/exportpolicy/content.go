package exportpolicy

import (
	"bytes"

	"sigs.k8s.io/yaml"
)

// kubeconfigUsers is what CarriesKubeconfig decodes of a value: the users
// of a kubeconfig, and of each user only whether it carries a credential.
// Nothing decoded leaves this file.
type kubeconfigUsers struct {
	Users []struct {
		User struct {
			Token         string `json:"token"`
			TokenFile     string `json:"tokenFile"`
			ClientKey     string `json:"client-key"`
			ClientKeyData string `json:"client-key-data"`
			Password      string `json:"password"`
			Exec          any    `json:"exec"`
			AuthProvider  any    `json:"auth-provider"`
		} `json:"user"`
	} `json:"users"`
}

// CarriesKubeconfig reports whether any value of a Secret's data is a
// kubeconfig (YAML or JSON) with a user that carries credentials: a
// token, a token file, a client key, a password, or an exec or
// auth-provider plugin (which mints credentials when run). A kubeconfig
// with only clusters and contexts, or with users that carry nothing,
// is no credential. Values that are not kubeconfigs cost a substring
// test: only those naming "users" are decoded.
func CarriesKubeconfig(data map[string][]byte) bool {
	for _, v := range data {
		if carriesKubeconfig(v) {
			return true
		}
	}
	return false
}

var usersKey = []byte("users")

func carriesKubeconfig(v []byte) bool {
	if !bytes.Contains(v, usersKey) {
		return false
	}
	var kc kubeconfigUsers
	if err := yaml.Unmarshal(v, &kc); err != nil {
		return false
	}
	for _, u := range kc.Users {
		c := u.User
		if c.Token != "" || c.TokenFile != "" || c.ClientKey != "" || c.ClientKeyData != "" || c.Password != "" ||
			c.Exec != nil || c.AuthProvider != nil {
			return true
		}
	}
	return false
}
