package localenv

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestObserve checks the Balancer's endpoints as a Service's: a replica
// joins at its first ready answer, leaves at once when it answers not
// ready or refuses the connection, and stays in while its probes go
// unanswered for less than unansweredLimit (the chart's probe would fail
// three times in that span), leaving at it.
func TestObserve(t *testing.T) {
	type probe struct {
		o  probeOutcome
		at time.Duration // when it ended, from the test's start
	}
	ready := func(at time.Duration) probe { return probe{probeReady, at} }
	notReady := func(at time.Duration) probe { return probe{probeNotReady, at} }
	unanswered := func(at time.Duration) probe { return probe{probeUnanswered, at} }
	const s = time.Second
	tests := []struct {
		name        string
		probes      []probe
		wantReady   bool
		wantUnready int64
	}{
		{name: "no probe yet", wantReady: false},
		{name: "first ready answer", probes: []probe{ready(0)}, wantReady: true},
		{name: "never ready never joins", probes: []probe{notReady(0), unanswered(20 * s)}, wantReady: false},
		{name: "not ready: out at once", probes: []probe{ready(0), notReady(s)}, wantReady: false, wantUnready: 1},
		{name: "unanswered for less than the limit: still in",
			probes: []probe{ready(0), unanswered(1 * s), unanswered(5 * s), unanswered(1*s + unansweredLimit - time.Millisecond)}, wantReady: true},
		{name: "unanswered for the limit: out",
			probes: []probe{ready(0), unanswered(1 * s), unanswered(5 * s), unanswered(1*s + unansweredLimit)}, wantReady: false, wantUnready: 1},
		{name: "an answer restarts the span",
			probes: []probe{ready(0), unanswered(1 * s), ready(8 * s), unanswered(9 * s), unanswered(9*s + unansweredLimit - time.Millisecond)}, wantReady: true},
		{name: "leaving is counted once",
			probes: []probe{ready(0), notReady(s), notReady(2 * s), unanswered(3 * s), unanswered(30 * s)}, wantReady: false, wantUnready: 1},
		{name: "back in at a ready answer, out again", probes: []probe{ready(0), notReady(s), ready(2 * s), notReady(3 * s)}, wantReady: false, wantUnready: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := &backend{}
			start := time.Now()
			for _, p := range tt.probes {
				be.observe(p.o, start.Add(p.at))
			}
			if be.ready.Load() != tt.wantReady || be.unready.Load() != tt.wantUnready {
				t.Errorf("after %v: ready=%t, left %d times; want ready=%t, left %d times",
					tt.probes, be.ready.Load(), be.unready.Load(), tt.wantReady, tt.wantUnready)
			}
		})
	}
}

// TestProbeOnce checks how a probe's answer is classified, against real
// HTTP servers.
func TestProbeOnce(t *testing.T) {
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: a server that is gone
		want    probeOutcome
	}{
		{name: "200", handler: status(http.StatusOK), want: probeReady},
		{name: "500 (shutting down, not synced)", handler: status(http.StatusInternalServerError), want: probeNotReady},
		{name: "connection refused", want: probeNotReady},
		{name: "no answer within the timeout", handler: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, want: probeUnanswered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.handler
			if h == nil {
				h = status(http.StatusOK)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			client := srv.Client()
			client.Timeout = 200 * time.Millisecond
			if tt.handler == nil {
				srv.Close()
			}
			be := &backend{health: srv.URL + "/readyz", client: client}
			if got := be.probeOnce(); got != tt.want {
				t.Errorf("probeOnce() = %d, want %d", got, tt.want)
			}
		})
	}
}
