// Package agentwatch serves the watches that select one Cluster's rows
// (fieldSelector spec.cluster=<name>, the watch every courier-agent holds,
// docs/design.md#pull-delivery) from a loop of its own instead of the generic server's watch
// handler.
//
// A watch costs its server, for as long as it is open, the stack of the
// goroutine parked in it. The Go runtime halves a stack at a garbage
// collection only when its frames plus 800 bytes fit in a quarter of it.
// The generic server's watch handler parks 4,568 bytes of frames (its
// WatchServer.HandleHTTP alone is 1,736, the long-running request metric
// around it 624), and sending an event grows the stack past 8 KiB: every
// watch kept 16 KiB of stack, a third of what a watch cost a replica at
// 10,000 pulled Clusters (docs/benchmarks.md, "What is left per watch").
// The loop here parks under 3,000 bytes, so an idle watch's stack is
// halved to 8 KiB at the next collection.
//
// It takes a request only once the whole handler chain has run
// (authentication, Courier's agent authorizer, audit): it wraps the
// generic server's director. It takes only what it serves exactly as the
// generic handler does: a watch of the resource's collection in one
// namespace, encoded as plain JSON, whose valid options select one value
// of the index field. Everything else, and every request it cannot
// parse, goes on to the generic handler, which answers it (errors
// included) as before. Like the generic handler, it sets the watch up in
// the request's goroutine and serves it from the shallow goroutine the
// generic server's APIServingWithRoutine leaves (k8s.io/apiserver's
// server/routine).
//
// What it does not do, and the generic handler does: compress a
// watch-list's initial events (optional for a server), trace, and count
// the watch in apiserver_longrunning_requests and apiserver_watch_events_*;
// courier_agent_watches and courier_agent_watch_events_total count it
// instead.
package agentwatch

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/server/routine"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
)

// Config is what the handler serves watches with.
type Config struct {
	// Resource is the watched resource, at the version it is served as.
	Resource schema.GroupVersionResource
	// IndexField is the field a watch's selector must require one value
	// of (spec.cluster).
	IndexField string
	// Watcher is the resource's storage.
	Watcher rest.Watcher
	// Serializer is the resource's negotiated serializer, as its API group
	// is installed with: the same media types are negotiated, and objects
	// and events encoded by the same encoders.
	Serializer runtime.NegotiatedSerializer
	// ConvertFieldLabel converts a field selector's label of Resource's
	// kind at its version to the internal one, as the generic handler
	// does with the scheme (runtime.Scheme.ConvertFieldLabel).
	ConvertFieldLabel func(label, value string) (string, string, error)
	// MinRequestTimeout is the generic server's: a watch that does not
	// ask for a timeout ends after a random duration between it and twice
	// it, so that clients spread over replicas again.
	MinRequestTimeout time.Duration
}

// Server serves the watches it takes.
type Server struct {
	cfg           Config
	objectEncoder runtime.Encoder // an object, to the served version
	eventEncoder  runtime.Encoder // a metav1.WatchEvent around it
}

// New returns a Server of the watches cfg describes.
func New(cfg Config) (*Server, error) {
	registerMetrics()
	if cfg.Watcher == nil || cfg.Serializer == nil || cfg.ConvertFieldLabel == nil || cfg.IndexField == "" {
		return nil, fmt.Errorf("agentwatch: a watcher, a serializer, a field label converter and an index field are required")
	}
	info, ok := runtime.SerializerInfoForMediaType(cfg.Serializer.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok || info.StreamSerializer == nil || info.StreamSerializer.Serializer == nil {
		return nil, fmt.Errorf("agentwatch: the serializer has no JSON stream serializer")
	}
	return &Server{
		cfg:           cfg,
		objectEncoder: cfg.Serializer.EncoderForVersion(info.Serializer, cfg.Resource.GroupVersion()),
		eventEncoder:  cfg.Serializer.EncoderForVersion(info.StreamSerializer.Serializer, cfg.Resource.GroupVersion()),
	}, nil
}

// Wrap returns a handler that serves the watches s takes and hands every
// other request to next: the generic server's director, so that every
// filter of the handler chain has run first.
func (s *Server) Wrap(next http.Handler) http.Handler {
	return &handler{Server: s, next: next}
}

type handler struct {
	*Server
	next http.Handler
}

var _ http.Handler = &handler{}

// ServeHTTP serves a watch it takes, and passes anything else on.
func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	info, ok := h.takes(req)
	if !ok {
		h.next.ServeHTTP(w, req)
		return
	}
	opts, ok := h.options(req)
	if !ok {
		h.next.ServeHTTP(w, req)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		h.next.ServeHTTP(w, req)
		return
	}
	ctx, cancel := h.watchContext(request.WithNamespace(req.Context(), info.Namespace), opts)
	watcher, err := h.cfg.Watcher.Watch(ctx, &opts)
	if err != nil {
		cancel()
		// As the generic handler answers a watch its storage refused
		// (410 Gone for a resourceVersion too old, for one).
		responsewriters.ErrorNegotiated(err, h.cfg.Serializer, h.cfg.Resource.GroupVersion(), w, req)
		return
	}
	var shuttingDown <-chan struct{}
	if s := request.ServerShutdownSignalFrom(req.Context()); s != nil {
		shuttingDown = s.ShuttingDown()
	}
	s := &stream{w: w, flusher: flusher, watcher: watcher, done: ctx.Done(), shuttingDown: shuttingDown, server: h.Server}
	serve := func() {
		defer cancel()
		defer watcher.Stop()
		s.serve()
	}
	if t := routine.TaskFrom(req.Context()); t != nil {
		t.Func = serve
		return
	}
	serve()
}

// takes reports whether req is a watch this handler serves: of the
// resource's collection in one namespace, not over a websocket, asking
// for plain JSON (no Table, no metadata only, not pretty).
func (h *handler) takes(req *http.Request) (*request.RequestInfo, bool) {
	info, ok := request.RequestInfoFrom(req.Context())
	r := h.cfg.Resource
	if !ok || !info.IsResourceRequest || info.Verb != "watch" || info.APIGroup != r.Group || info.APIVersion != r.Version ||
		info.Resource != r.Resource || info.Subresource != "" || info.Name != "" || info.Namespace == "" {
		return nil, false
	}
	if wsstream.IsWebSocketRequest(req) || req.URL.Query().Has("pretty") {
		return nil, false
	}
	mediaType, ok := negotiation.NegotiateMediaTypeOptions(req.Header.Get("Accept"), h.cfg.Serializer.SupportedMediaTypes(), anyTransform{})
	if !ok || mediaType.Convert != nil || mediaType.Pretty || mediaType.Accepted.MediaType != runtime.ContentTypeJSON {
		return nil, false
	}
	return info, true
}

// options are the request's list options, as the generic handler reads
// them, if they are valid and select one value of the index field.
func (h *handler) options(req *http.Request) (metainternalversion.ListOptions, bool) {
	var opts metainternalversion.ListOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		return opts, false
	}
	watchList := utilfeature.DefaultFeatureGate.Enabled(features.WatchList)
	metainternalversion.SetListOptionsDefaults(&opts, watchList)
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, watchList); len(errs) > 0 || opts.FieldSelector == nil {
		return opts, false
	}
	var err error
	if opts.FieldSelector, err = opts.FieldSelector.Transform(h.cfg.ConvertFieldLabel); err != nil {
		return opts, false
	}
	if v, ok := opts.FieldSelector.RequiresExactMatch(h.cfg.IndexField); !ok || v == "" {
		return opts, false
	}
	return opts, true
}

// watchContext is the watch's context: ended with the request, or after
// the generic handler's timeout: the request's timeoutSeconds, else a
// random duration between MinRequestTimeout and twice it.
func (h *handler) watchContext(ctx context.Context, opts metainternalversion.ListOptions) (context.Context, context.CancelFunc) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	} else if h.cfg.MinRequestTimeout > 0 {
		timeout = time.Duration(float64(h.cfg.MinRequestTimeout) * (rand.Float64() + 1))
	}
	if timeout == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// anyTransform lets negotiation pick whatever the client prefers, a Table
// or metadata only included, so that a request preferring one is told
// apart (and left to the generic handler) rather than served plain JSON.
type anyTransform struct{}

func (anyTransform) AllowsMediaTypeTransform(string, string, *schema.GroupVersionKind) bool {
	return true
}
func (anyTransform) AllowsServerVersion(string) bool  { return false }
func (anyTransform) AllowsStreamSchema(s string) bool { return s == "watch" }

// stream is one watch being served.
type stream struct {
	w            http.ResponseWriter
	flusher      http.Flusher
	watcher      watch.Interface
	done         <-chan struct{}
	shuttingDown <-chan struct{}
	server       *Server
}

// serve writes the watch's events until it ends: the client goes, its
// timeout passes, the server shuts down or the watcher closes. It is the
// frame a watch parks in: what it does per event is in send.
func (s *stream) serve() {
	watches.Inc()
	defer watches.Dec()
	s.begin()
	ch := s.watcher.ResultChan()
	for {
		select {
		case <-s.shuttingDown:
			return
		case <-s.done:
			return
		case ev, ok := <-ch:
			if !ok || !s.send(ev, len(ch) == 0) {
				return
			}
		}
	}
}

// begin writes the response's headers, as the generic handler does.
func (s *stream) begin() {
	s.w.Header().Set("Content-Type", runtime.ContentTypeJSON) // JSON is written as it is, as the generic handler does
	s.w.Header().Set("Transfer-Encoding", "chunked")
	s.w.WriteHeader(http.StatusOK)
	s.flusher.Flush()
}

// buffers hold an object's encoding while its event is written: a watch
// keeps no buffer of its own between events.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// send writes one event, and flushes when no other is waiting; it reports
// whether the watch goes on.
func (s *stream) send(ev watch.Event, flush bool) bool {
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	if err := s.server.objectEncoder.Encode(ev.Object, buf); err != nil {
		encodeErrors.Inc()
		klog.ErrorS(err, "Ending a watch: its event could not be encoded", "resource", s.server.cfg.Resource, "type", ev.Type)
		return false
	}
	event := &metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: buf.Bytes()}}
	if err := s.server.eventEncoder.Encode(event, s.w); err != nil {
		return false // the client went
	}
	events.Inc()
	if flush {
		s.flusher.Flush()
	}
	return true
}
