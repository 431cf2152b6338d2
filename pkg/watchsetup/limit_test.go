package watchsetup

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
)

const (
	watchURL = "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies?watch=true&fieldSelector=spec.cluster%3Dc1"
	listURL  = "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies"
	oldWatch = "/apis/courier.dev/v1alpha1/watch/namespaces/ws/downstreamcopies"
)

var resolver = &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

func codecs() runtime.NegotiatedSerializer {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return serializer.NewCodecFactory(scheme).WithoutConversion()
}

// setup stands for the handler chain: each request announces itself on
// arrived, then waits for a word on its own channel: "initialized" makes
// it call WatchInitialized and wait for another word, "return" ends it.
type setup struct {
	arrived chan chan string
}

func (s setup) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	words := make(chan string)
	s.arrived <- words
	for word := range words {
		switch word {
		case "initialized":
			utilflowcontrol.WatchInitialized(req.Context())
		case "return":
			w.WriteHeader(http.StatusOK)
			return
		}
	}
}

// serve runs req through h on a goroutine and returns what it answered,
// once it has.
func serve(h http.Handler, method, url string) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, url, nil))
		done <- rec
	}()
	return done
}

func arrival(t *testing.T, s setup) chan string {
	t.Helper()
	select {
	case words := <-s.arrived:
		return words
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the chain")
		return nil
	}
}

// notArrived checks that nothing reached the chain by the time a request
// sent after it, which needs no slot, has.
func notArrived(t *testing.T, h http.Handler, s setup) {
	t.Helper()
	control := serve(h, http.MethodGet, listURL)
	words := arrival(t, s)
	select {
	case other := <-s.arrived:
		t.Fatalf("a watch reached the chain while every slot was taken")
		close(other)
	default:
	}
	words <- "return"
	close(words)
	<-control
}

// TestLimit: with one slot, a second watch waits until the first is set
// up (its store's WatchInitialized) or has returned, while other requests
// pass; a watch that waits longer than the limit is refused with a 429
// and Retry-After.
func TestLimit(t *testing.T) {
	s := setup{arrived: make(chan chan string)}
	h := limitWaiting(s, 1, 10*time.Second, resolver, codecs())

	first := serve(h, http.MethodGet, watchURL)
	firstWords := arrival(t, s)
	second := serve(h, http.MethodGet, oldWatch)
	notArrived(t, h, s)

	firstWords <- "initialized"
	secondWords := arrival(t, s)
	// The first is set up and still served: it holds no slot. A third
	// waits for the second, which returns without a store's signal.
	third := serve(h, http.MethodGet, watchURL)
	notArrived(t, h, s)
	secondWords <- "return"
	close(secondWords)
	thirdWords := arrival(t, s)
	for _, words := range []chan string{firstWords, thirdWords} {
		words <- "return"
		close(words)
	}
	for _, done := range []<-chan *httptest.ResponseRecorder{first, second, third} {
		if rec := <-done; rec.Code != http.StatusOK {
			t.Errorf("a watch that got its slot: %d", rec.Code)
		}
	}
}

func TestLimitRefusesAfterWaiting(t *testing.T) {
	s := setup{arrived: make(chan chan string)}
	h := limitWaiting(s, 1, 50*time.Millisecond, resolver, codecs())
	first := serve(h, http.MethodGet, watchURL)
	words := arrival(t, s)

	rec := <-serve(h, http.MethodGet, watchURL)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("a watch that waited past the limit: %d, Retry-After %q; want 429 and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	var status metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &status); err != nil || status.Reason != metav1.StatusReasonTooManyRequests || status.Details == nil || status.Details.RetryAfterSeconds != 1 {
		t.Errorf("the refusal's body: %s (%v)", rec.Body.String(), err)
	}

	words <- "return"
	close(words)
	<-first
	// The slot is free again.
	again := serve(h, http.MethodGet, watchURL)
	words = arrival(t, s)
	words <- "return"
	close(words)
	if rec := <-again; rec.Code != http.StatusOK {
		t.Errorf("after the slot was given back: %d", rec.Code)
	}
}

// TestLimitLeavesTheRestAlone: requests that are not watches never wait,
// and a limit of 0 is no limit.
func TestLimitLeavesTheRestAlone(t *testing.T) {
	s := setup{arrived: make(chan chan string)}
	h := limitWaiting(s, 1, time.Hour, resolver, codecs())
	held := serve(h, http.MethodGet, watchURL)
	heldWords := arrival(t, s)
	for _, r := range []struct{ method, url string }{
		{http.MethodGet, listURL},
		{http.MethodPost, listURL},
		{http.MethodGet, "/healthz"},
		{http.MethodGet, "/apis/courier.dev/v1alpha1/namespaces/ws/downstreamcopies/row-1"},
	} {
		done := serve(h, r.method, r.url)
		words := arrival(t, s)
		words <- "return"
		close(words)
		if rec := <-done; rec.Code != http.StatusOK {
			t.Errorf("%s %s: %d", r.method, r.url, rec.Code)
		}
	}
	heldWords <- "return"
	close(heldWords)
	<-held

	unlimited := limitWaiting(s, 0, time.Hour, resolver, codecs())
	var open []chan string
	var done []<-chan *httptest.ResponseRecorder
	for range 3 {
		done = append(done, serve(unlimited, http.MethodGet, watchURL))
		open = append(open, arrival(t, s))
	}
	for i, words := range open {
		words <- "return"
		close(words)
		<-done[i]
	}
}

// TestLimitGivesUpWithTheClient: a watch whose client goes away while it
// waits leaves without a slot.
func TestLimitGivesUpWithTheClient(t *testing.T) {
	s := setup{arrived: make(chan chan string)}
	h := limitWaiting(s, 1, time.Hour, resolver, codecs())
	held := serve(h, http.MethodGet, watchURL)
	words := arrival(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, watchURL, nil).WithContext(ctx))
		done <- rec.Code
	}()
	cancel()
	select {
	case code := <-done:
		if code != http.StatusTooManyRequests {
			t.Errorf("a watch whose client left: %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a watch whose client left is still waiting")
	}
	words <- "return"
	close(words)
	<-held
}
