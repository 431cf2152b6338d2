package apiserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// testSummaries holds app's summary in fleet-default: Ready, Secret s at 5.
func testSummaries() *memstore.Store[*courier.DownstreamCopySummary] {
	s := memstore.New[*courier.DownstreamCopySummary]()
	s.Upsert(&courier.DownstreamCopySummary{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "app"},
		Spec:       courier.DownstreamCopySummarySpec{Owner: courier.CopyOwner{Kind: courier.OwnerKindHelmOp, Name: "app"}},
		Status: courier.DownstreamCopySummaryStatus{Clusters: 1, ReadyClusters: 1, Copies: 1, SyncedCopies: 1,
			Sources:    []courier.SummarySource{{Kind: "Secret", Name: "s", ResourceVersion: "5", Copies: 1, SyncedCopies: 1}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Synced"}}},
	})
	return s
}

func TestSummariesServed(t *testing.T) {
	h := testServer(t)
	t.Run("discovery", func(t *testing.T) {
		code, body := get(t, h, "admin", "/apis/courier.dev/v1alpha1")
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		var list metav1.APIResourceList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "downstreamcopysummaries" })
		if i < 0 {
			t.Fatalf("discovery has no downstreamcopysummaries: %s", body)
		}
		r := list.APIResources[i]
		if r.Kind != "DownstreamCopySummary" || !r.Namespaced || !slices.Equal(r.ShortNames, []string{"dcs"}) ||
			!slices.Equal(r.Categories, []string{"courier"}) || !slices.Equal(r.Verbs, metav1.Verbs{"get", "list", "watch"}) {
			t.Errorf("downstreamcopysummaries in discovery: %+v", r)
		}
	})
	t.Run("get by name", func(t *testing.T) {
		code, body := get(t, h, "admin", "/apis/courier.dev/v1alpha1/namespaces/fleet-default/downstreamcopysummaries/app")
		if code != http.StatusOK || !strings.Contains(string(body), `"kind":"DownstreamCopySummary"`) || !strings.Contains(string(body), `"status":"True"`) {
			t.Errorf("%d %s", code, body)
		}
	})
}
