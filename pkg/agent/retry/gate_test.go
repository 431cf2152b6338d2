package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// answers is a RoundTripper that gives the listed answers in turn and
// records when each request arrived.
type answers struct {
	clock *clocktesting.FakeClock
	codes []int
	ra    []string
	errs  []error
	at    []time.Time
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	i := len(a.at)
	a.at = append(a.at, a.clock.Now())
	if i < len(a.errs) && a.errs[i] != nil {
		return nil, a.errs[i]
	}
	h := http.Header{}
	if i < len(a.ra) && a.ra[i] != "" {
		h.Set("Retry-After", a.ra[i])
	}
	return &http.Response{StatusCode: a.codes[i], Header: h, Request: req}, nil
}

func testGate(clk *clocktesting.FakeClock, sample float64) *Gate {
	g := NewGate(Backoff{Initial: time.Second, Max: time.Minute, Jitter: 0.5, MaxRetryAfter: 10 * time.Minute})
	g.clock, g.sample = clk, func() float64 { return sample }
	return g
}

func TestGateNotBefore(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name  string
		codes []int
		ra    []string
		errs  []error
		want  time.Duration // NotBefore after the answers, from start; 0: none
	}{
		{"success waits for nothing", []int{200}, nil, nil, 0},
		{"a 404 is an answer, not a failure", []int{404}, nil, nil, 0},
		{"429 with Retry-After: its wait plus jitter", []int{429}, []string{"32"}, nil, 40 * time.Second},
		{"503 with Retry-After", []int{503}, []string{"4"}, nil, 5 * time.Second},
		{"429 without Retry-After: the first step", []int{429}, nil, nil, 1250 * time.Millisecond},
		{"unreadable Retry-After: the first step", []int{429}, []string{"soon"}, nil, 1250 * time.Millisecond},
		{"500s in a row double", []int{500, 500, 500}, nil, nil, 5 * time.Second},
		{"no answer is a failure", []int{0}, nil, []error{errors.New("connection refused")}, 1250 * time.Millisecond},
		{"a success ends the run", []int{500, 500, 200, 500}, nil, nil, 1250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			g := testGate(clk, 0.5)
			next := &answers{clock: clk, codes: tc.codes, ra: tc.ra, errs: tc.errs}
			rt := g.Wrap(next)
			for range tc.codes {
				// Each request is sent once the Gate lets it: step the
				// clock to NotBefore, as time would pass.
				if nb := g.NotBefore(); nb.After(clk.Now()) {
					clk.SetTime(nb)
				}
				req, _ := http.NewRequest(http.MethodGet, "https://upstream.example", nil)
				resp, err := rt.RoundTrip(req)
				if err == nil && resp.Header.Get("Retry-After") != "" {
					t.Errorf("the Gate passed Retry-After on; client-go would sleep it again inside the request")
				}
			}
			var got time.Duration
			if nb := g.NotBefore(); !nb.IsZero() && nb.After(clk.Now()) {
				got = nb.Sub(next.at[len(next.at)-1])
			}
			if got != tc.want {
				t.Errorf("after %v: wait %s, want %s", tc.codes, got, tc.want)
			}
		})
	}
}

// TestGateHoldsRequests: a request sent while the Gate is closed waits
// until it opens, however many ask, and one whose context ends first is
// not sent at all.
func TestGateHoldsRequests(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	g := testGate(clk, 0)
	next := &answers{clock: clk, codes: []int{429, 200, 200}, ra: []string{"3"}}
	rt := g.Wrap(next)
	req, _ := http.NewRequest(http.MethodGet, "https://upstream.example", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	sent := make(chan time.Time, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "https://upstream.example", nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Error(err)
		}
		sent <- clk.Now()
	}()
	// The request waits on the clock; step it short of the Retry-After.
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(2 * time.Second)
	select {
	case <-sent:
		t.Fatal("a request left 2 s after a 429 with Retry-After: 3")
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Second)
	if at := <-sent; at.Sub(next.at[0]) < 3*time.Second {
		t.Errorf("a request left %s after a 429 with Retry-After: 3", at.Sub(next.at[0]))
	}

	// Closed again; a request whose context is done gives up unsent.
	g.observe(&http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"60"}}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "https://upstream.example", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled request while the Gate is closed: err %v, want context.Canceled", err)
	}
	if len(next.at) != 2 {
		t.Errorf("%d requests reached the upstream, want 2 (the cancelled one is not sent)", len(next.at))
	}
}
