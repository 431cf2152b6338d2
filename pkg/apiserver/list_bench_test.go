package apiserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// BenchmarkListRows serves a list of 10,000 rows shaped like the scale
// benchmark's (test/bench) through Courier's real handler chain, without
// a port: what Courier itself spends on a list the aggregator forwards.
//
//	go test -run '^$' -bench ListRows -benchmem ./pkg/apiserver/
func BenchmarkListRows(b *testing.B) {
	h := testServer(b)
	store := testStore
	at := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	rows := make([]*courier.DownstreamCopy, 0, 10000)
	for c := 1; c <= 1000; c++ {
		for s := 0; s < 10; s++ {
			cluster, src := fmt.Sprintf("c%d", c), fmt.Sprintf("s%d", s)
			r := dcpRow(fmt.Sprintf("bench.%s.secret.%s", cluster, src), "Secret", src)
			r.Spec.Cluster = cluster
			r.Spec.Target.Namespace = "bench-1000-" + cluster
			r.Labels = map[string]string{"courier.dev/helmop": "bench", "courier.dev/cluster": cluster, "courier.dev/kind": "secret"}
			r.Spec.Source.ResourceVersion = "123456"
			r.Status = courier.DownstreamCopyStatus{Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "123456", LastSyncTime: &at,
				Message: "the copy matches its source", Conditions: []metav1.Condition{{Type: courier.ConditionReady,
					Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "Synced", Message: "the copy matches its source"}}}
			rows = append(rows, r)
		}
	}
	store.Replace(rows)
	for _, gzip := range []bool{false, true} {
		b.Run(fmt.Sprintf("gzip=%t", gzip), func(b *testing.B) {
			var size int
			for b.Loop() {
				size = listRows(b, h, gzip).Body.Len()
			}
			b.ReportMetric(float64(size), "bytes")
		})
	}
}

// listRows lists the rows of fleet-default as JSON, as the admin, asking
// for gzip or not, and fails unless the answer is 200.
func listRows(t testing.TB, h http.Handler, gzip bool) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopies", nil)
	req.Header.Set("Accept", "application/json")
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	req.Header.Set("X-Test-User", "admin")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %.300s", w.Code, w.Body.String())
	}
	return w
}
