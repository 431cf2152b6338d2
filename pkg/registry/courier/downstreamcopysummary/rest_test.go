package downstreamcopysummary

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// fakeSources answers SourceVersion from a map of "namespace/kind/name" to
// resourceVersion; err, when set, is every answer.
type fakeSources struct {
	mu    sync.Mutex
	rv    map[string]string
	err   error
	reads int
}

func (f *fakeSources) SourceVersion(_ context.Context, namespace, kind, name string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return "", false, f.err
	}
	rv, ok := f.rv[namespace+"/"+strings.ToLower(kind)+"/"+name]
	return rv, ok, nil
}

func (f *fakeSources) set(key, rv string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv[key] = rv
}

// summary is app's summary in ws: Ready as given, Secret s at rv.
func summary(ready metav1.ConditionStatus, rv string) *courier.DownstreamCopySummary {
	return &courier.DownstreamCopySummary{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "app"},
		Spec:       courier.DownstreamCopySummarySpec{Owner: courier.CopyOwner{Kind: courier.OwnerKindHelmOp, Name: "app"}},
		Status: courier.DownstreamCopySummaryStatus{Clusters: 2, ReadyClusters: 2, Copies: 2, SyncedCopies: 2,
			Sources:    []courier.SummarySource{{Kind: "Secret", Name: "s", ResourceVersion: rv, Copies: 2, SyncedCopies: 2}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: ready, Reason: "Synced", Message: "all synced"}}},
	}
}

func ctxWS() context.Context {
	return genericapirequest.WithNamespace(genericapirequest.NewContext(), "ws")
}

func newTestREST(s *courier.DownstreamCopySummary, src *fakeSources) (*REST, *memstore.Store[*courier.DownstreamCopySummary]) {
	store := memstore.New[*courier.DownstreamCopySummary]()
	store.Upsert(s)
	return NewREST(store, src, nil), store
}

func TestGetFloor(t *testing.T) {
	tcs := []struct {
		name       string
		summaryRV  string
		live       map[string]string
		err        error
		ready      metav1.ConditionStatus
		wantStatus metav1.ConditionStatus
		wantReason string
		wantIn     string
	}{
		{name: "current: as stored", summaryRV: "10", live: map[string]string{"ws/secret/s": "10"}, ready: "True", wantStatus: "True", wantReason: "Synced"},
		{name: "newer upstream: not ready", summaryRV: "10", live: map[string]string{"ws/secret/s": "11"}, ready: "True", wantStatus: "False", wantReason: ReasonSourceChanged,
			wantIn: "Secret s is at resourceVersion 11 (summed at 10)"},
		{name: "compared as numbers", summaryRV: "9", live: map[string]string{"ws/secret/s": "10"}, ready: "True", wantStatus: "False", wantReason: ReasonSourceChanged},
		{name: "older upstream (another replica's view is ahead): as stored", summaryRV: "10", live: map[string]string{"ws/secret/s": "9"}, ready: "True", wantStatus: "True", wantReason: "Synced"},
		{name: "versions that do not parse: by inequality", summaryRV: "a", live: map[string]string{"ws/secret/s": "b"}, ready: "True", wantStatus: "False", wantReason: ReasonSourceChanged},
		{name: "deleted upstream", summaryRV: "10", live: map[string]string{}, ready: "True", wantStatus: "False", wantReason: ReasonSourceChanged, wantIn: "was deleted"},
		{name: "created upstream", summaryRV: "", live: map[string]string{"ws/secret/s": "3"}, ready: "True", wantStatus: "False", wantReason: ReasonSourceChanged, wantIn: "summed as missing"},
		{name: "a read error: Unknown, never True", summaryRV: "10", err: errors.New("boom"), ready: "True", wantStatus: "Unknown", wantReason: ReasonSourceUnknown, wantIn: "boom"},
		{name: "a read error on a summary not ready: stays False", summaryRV: "10", err: errors.New("boom"), ready: "False", wantStatus: "False", wantReason: "Synced"},
		{name: "newer on a summary not ready: SourceChanged, keeps the old message", summaryRV: "10", live: map[string]string{"ws/secret/s": "12"}, ready: "False", wantStatus: "False",
			wantReason: ReasonSourceChanged, wantIn: "before that: all synced"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSources{rv: tc.live, err: tc.err}
			r, _ := newTestREST(summary(tc.ready, tc.summaryRV), src)
			obj, err := r.Get(ctxWS(), "app", &metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := readyOf(obj.(*courier.DownstreamCopySummary))
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantIn) {
				t.Errorf("Ready = %s %s %q, want %s %s containing %q", c.Status, c.Reason, c.Message, tc.wantStatus, tc.wantReason, tc.wantIn)
			}
			if tc.wantStatus != tc.ready && c.LastTransitionTime.IsZero() {
				t.Error("no lastTransitionTime")
			}
		})
	}
}

func TestListFloorsByNameOnly(t *testing.T) {
	src := &fakeSources{rv: map[string]string{"ws/secret/s": "11"}}
	r, _ := newTestREST(summary("True", "10"), src)
	for _, tc := range []struct {
		selector string
		want     metav1.ConditionStatus
	}{{"", "True"}, {"spec.owner.kind=HelmOp", "True"}, {"metadata.name=app", "False"}} {
		opts := &metainternalversion.ListOptions{}
		if tc.selector != "" {
			opts.FieldSelector = fields.ParseSelectorOrDie(tc.selector)
		}
		obj, err := r.List(ctxWS(), opts)
		if err != nil {
			t.Fatal(err)
		}
		l := obj.(*courier.DownstreamCopySummaryList)
		if len(l.Items) != 1 || readyOf(&l.Items[0]).Status != tc.want {
			t.Errorf("list %q: %+v, want Ready %s", tc.selector, l.Items, tc.want)
		}
	}
}

// TestWatchFloor is the race a summary's floor closes (docs/design.md#summaries): the source is written (live
// version 11) while the stored summary still says Ready at 10. A watch by
// name started then never streams Ready=True until a summary at 11 comes,
// whether from its initial events or from the history it resumes from.
func TestWatchFloor(t *testing.T) {
	for _, fromHistory := range []bool{false, true} {
		src := &fakeSources{rv: map[string]string{"ws/secret/s": "10"}}
		r, store := newTestREST(summary("True", "10"), src)
		_, rv := store.List("", nil)
		src.set("ws/secret/s", "11") // the write, before the wait starts
		stale := summary("True", "10")
		stale.Status.ReadyClusters = 1 // still at 10, another change
		store.Upsert(stale)
		opts := &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app")}
		if fromHistory {
			opts.ResourceVersion = rv
		}
		ctx, cancel := context.WithCancel(ctxWS())
		w, err := r.Watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		store.Upsert(summary("False", "11"))
		store.Upsert(summary("True", "11"))
		var got []string
		for len(got) < 3 || got[len(got)-1] != "11:True" {
			select {
			case ev := <-w.ResultChan():
				s := ev.Object.(*courier.DownstreamCopySummary)
				got = append(got, s.Status.Sources[0].ResourceVersion+":"+string(readyOf(s).Status))
			case <-time.After(5 * time.Second):
				t.Fatalf("from history %v: events %q, no Ready at 11", fromHistory, got)
			}
		}
		t.Logf("from history %v: events %q", fromHistory, got)
		for _, g := range got[:len(got)-1] {
			if strings.HasSuffix(g, ":True") {
				t.Errorf("from history %v: events %q: Ready=True before the summary reached the source's version", fromHistory, got)
			}
		}
		cancel()
		w.Stop()
	}
}

func TestWatchNotByNameIsNotFloored(t *testing.T) {
	src := &fakeSources{rv: map[string]string{"ws/secret/s": "11"}}
	r, _ := newTestREST(summary("True", "10"), src)
	w, err := r.Watch(ctxWS(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	if s := ev.Object.(*courier.DownstreamCopySummary); readyOf(s).Status != "True" || src.reads != 0 {
		t.Errorf("Ready %s after %d reads, want True as stored and no read", readyOf(s).Status, src.reads)
	}
}
