package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/agent/payload"
	"github.com/courier-dev/courier/pkg/agent/rows"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned/fake"
)

const ns = "fleet-default"

func row(name string, phase v1alpha1.CopyPhase, rv string) *v1alpha1.DownstreamCopy {
	return &v1alpha1.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app.edge.secret." + name},
		Spec: v1alpha1.DownstreamCopySpec{HelmOp: "app", Cluster: "edge",
			Source: v1alpha1.CopySource{Kind: "Secret", Name: name, ResourceVersion: rv}, Target: v1alpha1.CopyTarget{Namespace: "apps", Name: name}},
		Status: v1alpha1.DownstreamCopyStatus{Phase: phase}}
}

// payloads serves every payload as Courier would for upstream up-1, and
// counts the reads.
func payloads(t *testing.T, reads *atomic.Int32) rest.Interface {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		parts := strings.Split(r.URL.Path, "/")
		name := strings.TrimPrefix(parts[len(parts)-2], "app.edge.secret.")
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "7"}}
		p := copyspec.Secret(src, "apps", copyspec.Owner{UpstreamID: "up-1", HelmOp: types.NamespacedName{Namespace: ns, Name: "app"}, Cluster: "edge"})
		p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p)
	}))
	t.Cleanup(srv.Close)
	c, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c.CourierV1alpha1().RESTClient()
}

// Without --upstream-id the agent waits -- writing and removing nothing --
// until a row has a payload, and learns the id from it; a leftover row
// (Kept) or one whose source is missing is never read. With the flag it
// reads nothing.
func TestUpstreamID(t *testing.T) {
	client := fake.NewSimpleClientset(row("old", v1alpha1.CopyPhaseKept, "3"), row("absent", v1alpha1.CopyPhaseSourceMissing, ""))
	rc, err := rows.New(client, ns, "edge", "cattle-fleet-system")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc.Start(ctx)
	if !rc.WaitForSync(ctx) {
		t.Fatal("rows did not sync")
	}
	var reads atomic.Int32
	a := &Agent{cfg: &completedConfig{}, rows: rc, reader: payload.NewReader(payloads(t, &reads))}
	got := make(chan string, 1)
	go func() {
		id, err := a.upstreamID(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- id
	}()
	// A row with a payload appears: the id is learned from it.
	gvr := v1alpha1.SchemeGroupVersion.WithResource("downstreamcopies")
	if err := client.Tracker().Create(gvr, row("db", v1alpha1.CopyPhasePending, "7"), ns); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "up-1" {
			t.Errorf("learned %q, want up-1", id)
		}
	case <-ctx.Done():
		t.Fatal("the upstream id was never learned")
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d payload reads, want 1 (only the copyable row's)", n)
	}

	reads.Store(0)
	a.cfg.UpstreamID = "flagged"
	if id, _ := a.upstreamID(ctx); id != "flagged" || reads.Load() != 0 {
		t.Errorf("with --upstream-id: %q after %d reads, want flagged and none", id, reads.Load())
	}
}
