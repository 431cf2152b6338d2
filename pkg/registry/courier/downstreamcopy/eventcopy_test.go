package downstreamcopy_test

import (
	"context"
	"io"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopy"
)

// TestEventCopiesEncodeWithoutTouchingTheStore: the rows store's watchers
// get shallow copies (EventCopy), which the server's codec encodes -- it
// sets the kind on the object it encodes -- while readers copy the stored
// row. The race detector (make test runs unit tests with -race) fails it
// when the encoder's write reaches the stored row: it did with EventCopy
// returning the stored row itself.
func TestEventCopiesEncodeWithoutTouchingTheStore(t *testing.T) {
	s := memstore.New[*courier.DownstreamCopy](downstreamcopy.WatchIndex(), downstreamcopy.EventCopy())
	codec := apiserver.Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)
	var watches []<-chan struct{}
	var wg sync.WaitGroup
	for range 4 {
		w, err := s.Watch(context.Background(), "", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		done := make(chan struct{})
		watches = append(watches, done)
		wg.Go(func() {
			defer close(done)
			for range 20 {
				ev := <-w.ResultChan()
				if err := codec.Encode(ev.Object, io.Discard); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for _, done := range watches {
			for {
				select {
				case <-done:
				default:
					s.Get("ns", "r") // a deep copy: reads every field of the stored row
					continue
				}
				break
			}
		}
	})
	for i := range 20 {
		s.Upsert(&courier.DownstreamCopy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", Labels: map[string]string{"a": "b"}},
			Spec:       courier.DownstreamCopySpec{Cluster: "c", Source: courier.CopySource{Kind: "Secret", Name: "s", ResourceVersion: string(rune('a' + i))}},
		})
	}
	wg.Wait()
}
