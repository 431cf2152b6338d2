package exportpolicy

import (
	"context"
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
