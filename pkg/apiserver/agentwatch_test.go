package apiserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

// agentWatchEvents is courier_agent_watch_events_total: the events
// pkg/agentwatch has sent.
func agentWatchEvents(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "courier_agent_watch_events_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// streamRecorder records a response as a server's connection would carry
// it: the generic handler's metrics wrapper hands a watch a flusher only
// over a writer that can also tell when the client went.
type streamRecorder struct{ *httptest.ResponseRecorder }

func (streamRecorder) CloseNotify() <-chan bool { return make(chan bool) }

// A watch of one Cluster's rows, as every courier-agent holds, is served
// by pkg/agentwatch, and its response is byte for byte what the generic
// handler writes for a watch of the same rows (selected by another field,
// which the generic handler serves): headers, the initial events, the
// initial-events-end bookmark, through the server's own serializers.
func TestAgentWatchesAreWrittenAsTheGenericHandlerWritesThem(t *testing.T) {
	h := testServer(t)
	watch := func(selector string) (*httptest.ResponseRecorder, float64) {
		t.Helper()
		before := agentWatchEvents(t)
		req := httptest.NewRequest(http.MethodGet, "/apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopies?watch=true&fieldSelector="+selector+
			"&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", nil)
		req.Header.Set("Accept", "application/json, */*") // client-go's, for JSON
		req.Header.Set("X-Test-User", "admin")
		rec := streamRecorder{httptest.NewRecorder()}
		h.ServeHTTP(rec, req) // returns when the watch times out
		return rec.ResponseRecorder, agentWatchEvents(t) - before
	}
	agent, sentByAgentWatch := watch("spec.cluster%3Dedge1")
	generic, sentByGeneric := watch("spec.helmOp%3Dapp")
	if sentByAgentWatch != 3 || sentByGeneric != 0 {
		t.Fatalf("pkg/agentwatch sent %v events for the Cluster's watch (want 2 rows and a bookmark) and %v for the other (want 0)", sentByAgentWatch, sentByGeneric)
	}
	for _, k := range []string{"Content-Type", "Transfer-Encoding", "Content-Encoding"} {
		if a, g := agent.Header().Get(k), generic.Header().Get(k); a != g {
			t.Errorf("%s: %q, the generic handler's %q", k, a, g)
		}
	}
	if agent.Code != generic.Code || !bytes.Equal(agent.Body.Bytes(), generic.Body.Bytes()) {
		t.Fatalf("answered %d:\n%s\nthe generic handler %d:\n%s", agent.Code, agent.Body, generic.Code, generic.Body)
	}
	if !bytes.Contains(agent.Body.Bytes(), []byte(`"k8s.io/initial-events-end":"true"`)) {
		t.Fatalf("no initial-events-end bookmark in\n%s", agent.Body)
	}
}
