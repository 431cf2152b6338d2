package memstore

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// continueVersion names the format of continue tokens.
const continueVersion = "memstore.courier.dev/v1"

// continueToken is what a continue token holds, as unpadded URL-safe
// base64 of JSON, the kube-apiserver's way: the resource version of the
// list's state and the key of the last item returned. The next page starts
// after that key. Clients treat the token as opaque.
type continueToken struct {
	Version   string `json:"v"`
	RV        uint64 `json:"rv"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"name"`
}

func encodeContinue(rv uint64, last Key) string {
	data, err := json.Marshal(continueToken{Version: continueVersion, RV: rv, Namespace: last.Namespace, Name: last.Name})
	if err != nil {
		panic(fmt.Sprintf("memstore: encoding a continue token: %v", err)) // strings and a number
	}
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(token string) (rv uint64, last Key, err error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, Key{}, err
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return 0, Key{}, err
	}
	switch {
	case c.Version != continueVersion:
		return 0, Key{}, fmt.Errorf("unknown version %q", c.Version)
	case c.RV == 0:
		return 0, Key{}, errors.New("no resource version")
	case c.Name == "":
		return 0, Key{}, errors.New("no name")
	}
	return c.RV, Key{Namespace: c.Namespace, Name: c.Name}, nil
}
