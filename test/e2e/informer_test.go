package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/pkg/generated/informers/externalversions"
)

// requestLog records the query of every request a client makes.
type requestLog struct {
	mu      sync.Mutex
	queries []string
	next    http.RoundTripper
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.queries = append(l.queries, r.URL.Path+"?"+r.URL.RawQuery)
	l.mu.Unlock()
	return l.next.RoundTrip(r)
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.queries...)
}

// TestGeneratedInformerWatchList syncs an informer built from
// pkg/generated/informers against Courier through the aggregator, and
// checks it used watch-list (sendInitialEvents) rather than a plain list.
func TestGeneratedInformerWatchList(t *testing.T) {
	w := newWorkspace(t, "ws-informer", nil, nil)
	w.apply(selectAll("default"))
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/a", "ConfigMap/b")}))
	w.waitRows(metav1.ListOptions{}, "c1/ConfigMap/b@default=SourceMissing", "c1/Secret/a@default=SourceMissing",
		"c2/ConfigMap/b@default=SourceMissing", "c2/Secret/a@default=SourceMissing")

	log := &requestLog{}
	cfg := rest.CopyConfig(env.Upstream.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { log.next = rt; return log })
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(w.ns))
	informer := factory.Courier().V1alpha1().DownstreamCopies()
	lister := informer.Lister()
	informer.Informer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx is done.
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatalf("informer did not sync; requests: %q", log.all())
	}
	rows, err := lister.List(labels.Everything())
	if err != nil || len(rows) != 4 {
		t.Fatalf("lister holds %d rows (err %v), want 4", len(rows), err)
	}
	watchList := false
	for _, q := range log.all() {
		if strings.Contains(q, "watch=true") && strings.Contains(q, "sendInitialEvents=true") {
			watchList = true
		}
	}
	if !watchList {
		t.Errorf("informer did not use watch-list; requests: %q", log.all())
	}

	// The informer follows changes.
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/a")}))
	eventually(t, "informer sees rows removed", func() (bool, string) {
		rows, _ := lister.List(labels.Everything())
		return len(rows) == 2, fmt.Sprintf("lister holds %d rows, want 2", len(rows))
	})
}
