package agentauth

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/memstore"
)

func cluster(ns, name, agent string) *fleet.Cluster {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if agent != "" {
		c.Annotations = map[string]string{courier.AnnotationAgentUser: agent}
	}
	return c
}

func TestClusterIndex(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &fleet.Cluster{}, 0, cache.Indexers{})
	x, err := NewClusterIndex(informer)
	if err != nil {
		t.Fatal(err)
	}
	store := informer.GetIndexer()
	for _, c := range []*fleet.Cluster{
		cluster("ws", "edge1", "agent-a"),
		cluster("ws2", "edge9", "agent-a"),
		cluster("ws", "edge2", "agent-b"),
		cluster("ws", "pushed", ""),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "empty", Annotations: map[string]string{courier.AnnotationAgentUser: ""}}},
		// Malformed (delivery.Of): nobody delivers, so nobody is its agent.
		cluster("ws", "spaced", " agent-d"),
		cluster("ws", "anonymous", "system:anonymous"),
	} {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	sorted := func(u string) []types.NamespacedName {
		out := x.ClustersOf(u)
		slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		return out
	}
	if got, want := sorted("agent-a"), []types.NamespacedName{{Namespace: "ws", Name: "edge1"}, {Namespace: "ws2", Name: "edge9"}}; !slices.Equal(got, want) {
		t.Errorf("agent-a: %v, want %v", got, want)
	}
	if got := sorted(""); len(got) != 0 {
		t.Errorf("an empty annotation names %v", got)
	}
	for _, u := range []string{" agent-d", "agent-d", "system:anonymous"} {
		if got := sorted(u); len(got) != 0 {
			t.Errorf("%q is the agent of %v through a malformed annotation", u, got)
		}
	}
	if got := sorted("nobody"); len(got) != 0 {
		t.Errorf("nobody is the agent of %v", got)
	}
	// The annotation moves: the index follows.
	if err := store.Update(cluster("ws", "edge2", "agent-c")); err != nil {
		t.Fatal(err)
	}
	if got := sorted("agent-b"); len(got) != 0 {
		t.Errorf("agent-b after its annotation moved: %v", got)
	}
	if got := sorted("agent-c"); !slices.Equal(got, []types.NamespacedName{{Namespace: "ws", Name: "edge2"}}) {
		t.Errorf("agent-c: %v", got)
	}
	if x.HasSynced() {
		t.Error("an informer that never ran has synced")
	}
}

func TestStoreRows(t *testing.T) {
	store := memstore.New[*courier.DownstreamCopy]()
	store.Replace([]*courier.DownstreamCopy{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "app.edge1.secret.s"},
		Spec:       courier.DownstreamCopySpec{Cluster: "edge1"},
	}})
	rows := StoreRows{Store: store}
	if c, ok := rows.ClusterOf("ws", "app.edge1.secret.s"); !ok || c != "edge1" {
		t.Errorf("ClusterOf = %q, %v", c, ok)
	}
	if _, ok := rows.ClusterOf("other", "app.edge1.secret.s"); ok {
		t.Error("a row found in another namespace")
	}
}
