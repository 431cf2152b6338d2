package downstreamcopysummary

import (
	"context"
	"errors"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// catchUp is a Syncer that, as the summarizer catching up with the rows
// would, writes the summary its reader must be served; err, when set, is
// its answer instead, and nothing is written.
type catchUp struct {
	store *memstore.Store[*courier.DownstreamCopySummary]
	fresh *courier.DownstreamCopySummary
	err   error
	calls int
}

func (c *catchUp) Sync(context.Context) error {
	c.calls++
	if c.err != nil {
		return c.err
	}
	c.store.Upsert(c.fresh)
	return nil
}

// Every read is served the summaries as the summarizer has them after
// Sync, and one that could not catch up the summaries as stored.
func TestReadsSyncFirst(t *testing.T) {
	read := map[string]func(*REST) (*courier.DownstreamCopySummary, error){
		"get": func(r *REST) (*courier.DownstreamCopySummary, error) {
			o, err := r.Get(ctxWS(), "app", &metav1.GetOptions{})
			return asSummary(o), err
		},
		"list": func(r *REST) (*courier.DownstreamCopySummary, error) {
			o, err := r.List(ctxWS(), &metainternalversion.ListOptions{})
			if err != nil {
				return nil, err
			}
			return &o.(*courier.DownstreamCopySummaryList).Items[0], nil
		},
		"watch": func(r *REST) (*courier.DownstreamCopySummary, error) {
			w, err := r.Watch(ctxWS(), &metainternalversion.ListOptions{})
			if err != nil {
				return nil, err
			}
			defer w.Stop()
			select {
			case ev := <-w.ResultChan():
				return asSummary(ev.Object), nil
			case <-time.After(5 * time.Second):
				return nil, errors.New("no initial event")
			}
		},
	}
	for verb, do := range read {
		for _, tc := range []struct {
			name   string
			err    error
			wantRV string
		}{
			{name: "caught up", wantRV: "11"},
			{name: "gave up: as stored", err: context.DeadlineExceeded, wantRV: "10"},
		} {
			t.Run(verb+"/"+tc.name, func(t *testing.T) {
				src := &fakeSources{rv: map[string]string{"ws/secret/s": "11"}}
				store := memstore.New[*courier.DownstreamCopySummary]()
				store.Upsert(summary(metav1.ConditionFalse, "10"))
				syncer := &catchUp{store: store, fresh: summary(metav1.ConditionTrue, "11"), err: tc.err}
				r := NewREST(store, src, syncer)
				got, err := do(r)
				if err != nil {
					t.Fatal(err)
				}
				if syncer.calls != 1 {
					t.Errorf("Sync called %d times, want 1", syncer.calls)
				}
				if rv := got.Status.Sources[0].ResourceVersion; rv != tc.wantRV {
					t.Errorf("served the summary at %s, want %s", rv, tc.wantRV)
				}
			})
		}
	}
}

func asSummary(o runtime.Object) *courier.DownstreamCopySummary {
	s, _ := o.(*courier.DownstreamCopySummary)
	return s
}
