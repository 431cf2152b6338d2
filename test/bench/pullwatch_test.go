package bench

import (
	"context"
	"encoding/json"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// How the simulated agents decode their watch events. Every simulated
// agent shares this machine's two cores with Courier, the aggregator and
// the clusters, where a real agent decodes on its own node. client-go's
// watch decoder, which the real agent's informer uses, scans each event
// several times and builds every field of the row: in the pull row's
// change window it was 83 % of the benchmark's own CPU, more than either
// Courier replica used, and so part of the latency measured. By default
// the simulated agents read their watch stream with encoding/json in one
// decode per event, into what an agent acts on (the row's metadata and
// spec, or an error's Status), leaving its status unread: every event
// still crosses the wire and is parsed whole. COURIER_BENCH_PULL_DECODE=
// client-go decodes as the real agent does.
const (
	decodeLean     = "lean"
	decodeClientGo = "client-go"
)

// pullDecode is the decoder the simulated agents use.
func pullDecode() string {
	if os.Getenv("COURIER_BENCH_PULL_DECODE") == decodeClientGo {
		return decodeClientGo
	}
	return decodeLean
}

// watchStream is one simulated agent's open watch.
type watchStream interface {
	// next returns the next event; an error when the watch has ended
	// (io.EOF when the server closed it).
	next() (watch.EventType, runtime.Object, error)
	stop()
}

// openWatch opens user's watch of its rows in ws with opts, decoded as
// decode says.
func openWatch(ctx context.Context, fc versioned.Interface, ws, user string, opts metav1.ListOptions, decode string) (watchStream, error) {
	if decode == decodeClientGo {
		w, err := watchAs(ctx, fc, ws, user, opts)
		if err != nil {
			return nil, err
		}
		return &clientGoStream{ctx: ctx, w: w}, nil
	}
	body, err := watchRequest(fc, ws, user, opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	return &leanStream{body: body, dec: json.NewDecoder(body)}, nil
}

// clientGoStream reads a client-go watch.
type clientGoStream struct {
	ctx context.Context
	w   watch.Interface
}

func (s *clientGoStream) next() (watch.EventType, runtime.Object, error) {
	select {
	case ev, ok := <-s.w.ResultChan():
		if !ok {
			return "", nil, io.EOF
		}
		return ev.Type, ev.Object, nil
	case <-s.ctx.Done():
		return "", nil, s.ctx.Err()
	}
}

func (s *clientGoStream) stop() { s.w.Stop() }

// leanStream reads a watch's JSON stream itself.
type leanStream struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// leanEvent is a watch event as an agent reads it: a row's metadata and
// spec, or an ERROR event's Status.
type leanEvent struct {
	Type   watch.EventType `json:"type"`
	Object struct {
		Metadata metav1.ObjectMeta                  `json:"metadata"`
		Spec     courierv1alpha1.DownstreamCopySpec `json:"spec"`
		// An ERROR event's Status.
		Code    int32               `json:"code"`
		Reason  metav1.StatusReason `json:"reason"`
		Message string              `json:"message"`
	} `json:"object"`
}

func (s *leanStream) next() (watch.EventType, runtime.Object, error) {
	var e leanEvent
	if err := s.dec.Decode(&e); err != nil {
		return "", nil, err
	}
	if e.Type == watch.Error {
		return e.Type, &metav1.Status{Status: metav1.StatusFailure, Code: e.Object.Code, Reason: e.Object.Reason, Message: e.Object.Message}, nil
	}
	return e.Type, &courierv1alpha1.DownstreamCopy{ObjectMeta: e.Object.Metadata, Spec: e.Object.Spec}, nil
}

func (s *leanStream) stop() { _ = s.body.Close() }

// decodeDescription says how the simulated agents decoded their events.
func decodeDescription(decode string) string {
	if decode == decodeClientGo {
		return "with client-go's watch decoder, as the real agent (COURIER_BENCH_PULL_DECODE=client-go)"
	}
	return "in one encoding/json pass, metadata and spec (the default; COURIER_BENCH_PULL_DECODE=client-go decodes as the real agent)"
}
