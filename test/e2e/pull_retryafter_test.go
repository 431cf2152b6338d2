package e2e

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// frontRetryAfter is the Retry-After the front answers with: above the
// reflector's first backoff (0.8 to 1.6 s) and the reporter's (1 s), so
// that only the agent's own pacing keeps to it.
const frontRetryAfter = 3 * time.Second

// overloadFront stands between a courier-agent and the real upstream as
// an overloaded kube-apiserver would: it answers the first refuse
// requests of each kind (rows: list or watch; payload; status) with 429
// and Retry-After, passes every other request on as the agent's user,
// and records when each arrived and whether it was refused.
type overloadFront struct {
	refuse int
	proxy  *httputil.ReverseProxy

	mu       sync.Mutex
	attempts map[string][]frontAttempt
}

type frontAttempt struct {
	at      time.Time
	refused bool
}

func (f *overloadFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := ""
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/downstreamcopies"):
		kind = "rows"
	case strings.Contains(p, "/downstreamcopies/") && strings.HasSuffix(p, "/payload"):
		kind = "payload"
	case strings.Contains(p, "/downstreamcopies/") && strings.HasSuffix(p, "/status"):
		kind = "status"
	}
	if kind != "" {
		f.mu.Lock()
		refused := len(f.attempts[kind]) < f.refuse
		f.attempts[kind] = append(f.attempts[kind], frontAttempt{at: time.Now(), refused: refused})
		f.mu.Unlock()
		if refused {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,` +
				`"message":"Too many requests, please try again later."}`))
			return
		}
	}
	f.proxy.ServeHTTP(w, r)
}

// startOverloadFront starts the front for user and returns it and a
// kubeconfig that reaches the upstream through it.
func startOverloadFront(t *testing.T, user string, refuse int) (*overloadFront, string) {
	t.Helper()
	_, cfg, err := env.UserKubeconfig(env.Upstream, user)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	f := &overloadFront{refuse: refuse, attempts: map[string][]frontAttempt{}, proxy: &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1, // watches stream
	}}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["front"] = &clientcmdapi.Cluster{Server: srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["front"] = &clientcmdapi.Context{Cluster: "front", AuthInfo: "agent"}
	kc.CurrentContext = "front"
	path := filepath.Join(t.TempDir(), "front.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return f, path
}

// TestPullAgentHonoursRetryAfter runs a real courier-agent whose way to
// the real upstream goes through overloadFront: its first two requests of
// each kind are refused with 429 and Retry-After: 3. The agent gets
// through (its copy lands and its rows turn Synced), and no request of a
// kind came sooner than 3 s after the 429 before it.
func TestPullAgentHonoursRetryAfter(t *testing.T) {
	const user = "courier-agent-retry"
	w := pullWorkspace(t, "ws-retry", user)
	front, kubeconfig := startOverloadFront(t, user, 2)
	dest := "retry-dest"
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "paced"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DefaultNamespace: dest, DownstreamResources: resources("ConfigMap/settings")}))
	// The last --upstream-kubeconfig wins: the front's.
	startAgent(t, w, user, "--upstream-kubeconfig="+kubeconfig, "--initial-jitter=0s", "--report-interval=5s")
	waitConfigMap(t, pulled, dest, "settings", 2*time.Minute, "copied through the front", configMapData("mode", "paced"))
	w.waitRows(metav1.ListOptions{}, "edge/ConfigMap/settings@"+dest+"=Synced")

	front.mu.Lock()
	defer front.mu.Unlock()
	for _, kind := range []string{"rows", "payload", "status"} {
		att := front.attempts[kind]
		if len(att) <= front.refuse {
			t.Errorf("%s: %d requests reached the front, want more than the %d refused", kind, len(att), front.refuse)
			continue
		}
		for i := 1; i < len(att); i++ {
			if gap := att[i].at.Sub(att[i-1].at); att[i-1].refused && gap < frontRetryAfter {
				t.Errorf("%s: request %d came %s after a 429 with Retry-After: 3", kind, i+1, gap.Round(time.Millisecond))
			} else if att[i-1].refused {
				t.Logf("%s: request %d came %s after a 429 with Retry-After: 3", kind, i+1, gap.Round(time.Millisecond))
			}
		}
	}
}
