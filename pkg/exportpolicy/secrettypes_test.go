package exportpolicy

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// secretTable is a kube-apiserver's Table answer for one Secret.
const secretTable = `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},
"columnDefinitions":[{"name":"Name","type":"string"},{"name":"Type","type":"string"},{"name":"Data","type":"string"},{"name":"Age","type":"string"}],
"rows":[{"cells":["tok","kubernetes.io/service-account-token",3,"5m"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
"metadata":{"name":"tok","namespace":"ns","uid":"uid-1","resourceVersion":"7"}}}]}`

func TestSecretTypesReadsATableOncePerUID(t *testing.T) {
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		if r.URL.Path != "/api/v1/namespaces/ns/secrets/tok" || !strings.Contains(r.Header.Get("Accept"), "as=Table") {
			http.Error(w, "unexpected request "+r.URL.Path+" "+r.Header.Get("Accept"), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(secretTable))
	}))
	defer srv.Close()
	kube := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	st := NewSecretTypes(kube.CoreV1().RESTClient())
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		got, err := st.Type(ctx, "ns", "tok", "uid-1")
		if err != nil || got != corev1.SecretTypeServiceAccountToken {
			t.Fatalf("Type = %q, %v; want the token type", got, err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads for one Secret, want 1", n)
	}
	// Another object under the same name (the UID the caller saw is not
	// the one read) is an error, and nothing is remembered for it.
	if _, err := st.Type(ctx, "ns", "tok", "uid-2"); err == nil || !strings.Contains(err.Error(), "uid-2") {
		t.Errorf("a replaced Secret gave %v, want an error naming the UID", err)
	}
	if st.Len() != 1 {
		t.Errorf("%d types held, want 1", st.Len())
	}
	st.Forget("uid-1")
	if st.Len() != 0 {
		t.Errorf("%d types held after Forget, want 0", st.Len())
	}
}

func TestTypeFromTableRejectsWhatIsNotASecretTable(t *testing.T) {
	for name, raw := range map[string]string{
		"not json":        `{`,
		"not a table":     `{"kind":"Secret","type":"Opaque"}`,
		"no type column":  `{"kind":"Table","columnDefinitions":[{"name":"Name"}],"rows":[{"cells":["x"],"object":{"metadata":{"uid":"u"}}}]}`,
		"no object":       `{"kind":"Table","columnDefinitions":[{"name":"Name"},{"name":"Type"}],"rows":[{"cells":["x","Opaque"]}]}`,
		"type not string": `{"kind":"Table","columnDefinitions":[{"name":"Name"},{"name":"Type"}],"rows":[{"cells":["x",3],"object":{"metadata":{"uid":"u"}}}]}`,
		"two rows":        `{"kind":"Table","columnDefinitions":[{"name":"Type"}],"rows":[{"cells":["a"]},{"cells":["b"]}]}`,
	} {
		if _, _, err := typeFromTable([]byte(raw)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestKubeconfigContentReadsOncePerVersion: a Secret is read in full once
// per resourceVersion; the answer, never the data, is kept; a read that
// finds another version or another object is an error remembering nothing.
func TestKubeconfigContentReadsOncePerVersion(t *testing.T) {
	var reads atomic.Int32
	var rv atomic.Value
	rv.Store("7")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		if r.URL.Path != "/api/v1/namespaces/ns/secrets/kc" {
			http.Error(w, "unexpected request "+r.URL.Path, http.StatusBadRequest)
			return
		}
		config := "plain"
		if rv.Load() == "8" {
			config = `{"kind":"Config","users":[{"name":"u","user":{"token":"canary"}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"kc","namespace":"ns","uid":"uid-1","resourceVersion":"` +
			rv.Load().(string) + `"},"data":{"config":"` + base64.StdEncoding.EncodeToString([]byte(config)) + `"}}`))
	}))
	defer srv.Close()
	kube := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	st := NewSecretTypes(kube.CoreV1().RESTClient())
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if got, err := st.KubeconfigContent(ctx, "ns", "kc", "uid-1", "7"); err != nil || got {
			t.Fatalf("version 7: %v, %v; want false", got, err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads of one version, want 1", n)
	}
	// The watch is behind the read: an error, nothing kept.
	rv.Store("8")
	if _, err := st.KubeconfigContent(ctx, "ns", "kc", "uid-1", "7x"); err == nil || !strings.Contains(err.Error(), "changed meanwhile") {
		t.Errorf("a newer version read gave %v, want an error", err)
	}
	if got, err := st.KubeconfigContent(ctx, "ns", "kc", "uid-1", "8"); err != nil || !got {
		t.Errorf("version 8: %v, %v; want true", got, err)
	}
	if _, err := st.KubeconfigContent(ctx, "ns", "kc", "uid-2", "8"); err == nil || !strings.Contains(err.Error(), "uid-2") {
		t.Errorf("a replaced Secret gave %v, want an error naming the UID", err)
	}
	st.Forget("uid-1")
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.content) != 0 {
		t.Errorf("%d answers held after Forget", len(st.content))
	}
}
