package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/engine"
)

// retryAfterSeconds is what the front tells the agent to wait. Above the
// reflector's first backoff (0.8 to 1.6 s), so that only the agent's own
// pacing can keep it.
const retryAfterSeconds = 2

// front stands for an overloaded upstream: it answers the first refuse
// requests of each kind (rows: the reflector's list or watch-list;
// payload) with 429 and Retry-After, as the kube-apiserver's priority and
// fairness does, then serves them, and records when each request arrived.
type front struct {
	refuse int

	mu       sync.Mutex
	attempts map[string][]time.Time
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := "rows"
	if strings.HasSuffix(r.URL.Path, "/payload") {
		kind = "payload"
	}
	f.mu.Lock()
	f.attempts[kind] = append(f.attempts[kind], time.Now())
	n := len(f.attempts[kind])
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n <= f.refuse {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
			Message: "Too many requests, please try again later."})
		return
	}
	switch {
	case kind == "rows" && r.URL.Query().Get("watch") != "true":
		_, _ = w.Write([]byte(`{"kind":"DownstreamCopyList","apiVersion":"courier.dev/v1alpha1","metadata":{"resourceVersion":"1"},"items":[]}`))
	case kind == "payload":
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", ResourceVersion: "7"}}
		p := copyspec.Secret(src, "apps", copyspec.Owner{UpstreamID: "up-1", HelmOp: types.NamespacedName{Namespace: ns, Name: "app"}, Cluster: "edge"})
		p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
		_ = json.NewEncoder(w).Encode(p)
	default: // a watch (list): no rows, the end of the initial events, then quiet
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			_, _ = w.Write([]byte(`{"type":"BOOKMARK","object":{"kind":"DownstreamCopy","apiVersion":"courier.dev/v1alpha1",` +
				`"metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// gaps returns the times between consecutive requests of kind.
func (f *front) gaps(kind string) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(f.attempts[kind]); i++ {
		out = append(out, f.attempts[kind][i].Sub(f.attempts[kind][i-1]))
	}
	return out
}

// TestAgentHonoursRetryAfter fails when the agent sends a request sooner
// than the Retry-After of the 429 before it: its list of rows (the
// reflector's watch-list, then list, which on its own retry after 0.8 to
// 1.6 s) and its payload
// reads (the engine's queue retries at once), through the upstream client
// Complete builds.
func TestAgentHonoursRetryAfter(t *testing.T) {
	f := &front{refuse: 2, attempts: map[string][]time.Time{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg, err := Config{Cluster: types.NamespacedName{Namespace: ns, Name: "edge"},
		Upstream: &rest.Config{Host: srv.URL}, Local: &rest.Config{Host: "http://127.0.0.1:1"}}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	a, err := cfg.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a.rows.Start(ctx)
	if !a.rows.WaitForSync(ctx) {
		t.Fatal("the rows never synced")
	}
	// As the engine's queue does: read again at once after each failure.
	src := engine.Source{Kind: "Secret", Namespace: ns, Name: "db", Row: ns + "/app.edge.secret.db"}
	for i := 0; ; i++ {
		if _, err := a.reader.Read(ctx, src); err == nil {
			break
		} else if i > f.refuse || ctx.Err() != nil {
			t.Fatalf("payload read %d: %v", i, err)
		}
	}
	for _, kind := range []string{"rows", "payload"} {
		gaps := f.gaps(kind)
		if len(gaps) != f.refuse {
			t.Errorf("%s: %d requests, want %d (%d refused, then one served)", kind, len(gaps)+1, f.refuse+1, f.refuse)
		}
		for i, g := range gaps {
			if g < retryAfterSeconds*time.Second {
				t.Errorf("%s: request %d came %s after a 429 with Retry-After: %d", kind, i+2, g.Round(time.Millisecond), retryAfterSeconds)
			}
		}
		t.Logf("%s: gaps after each 429: %v", kind, gaps)
	}
}
