package targeting

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// FuzzResolve feeds Resolve a HelmOp spec and a ClusterGroup selector
// decoded from arbitrary JSON (selectors that do not parse, empty and
// duplicate entries, odd names) and clusters with arbitrary labels. It
// checks that Resolve never panics, that every Cluster is matched at most
// once, in name order, and that every match has a destination namespace
// and no duplicate resources.
func FuzzResolve(f *testing.F) {
	f.Add([]byte(`{"downstreamResources":[{"kind":"Secret","name":"a"},{"kind":"secret","name":"a"}],"targets":[{"clusterSelector":{"matchLabels":{"env":"prod"}}}]}`),
		[]byte(`{"matchLabels":{"env":"prod"}}`), "env=prod,x=y")
	f.Add([]byte(`{"targets":[{"clusterSelector":{"matchExpressions":[{"key":"env","operator":"Foo"}]}},{"clusterGroup":"g"}]}`),
		[]byte(`{"matchExpressions":[{"key":"a b","operator":"In"}]}`), "env=dev")
	f.Add([]byte(`{"targets":[{"clusterGroupSelector":{}},{"doNotDeploy":true,"clusterName":"c0"}],"namespace":"x","defaultNamespace":"y"}`),
		[]byte(`{}`), "")
	f.Add([]byte(`{"targets":[{}]}`), []byte(`null`), "a=b")
	f.Fuzz(func(t *testing.T, spec, groupSelector []byte, clusterLabels string) {
		op := &v1alpha1.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "op"}}
		if json.Unmarshal(spec, &op.Spec) != nil {
			return
		}
		var sel *metav1.LabelSelector
		if json.Unmarshal(groupSelector, &sel) != nil {
			return
		}
		l := map[string]string{}
		for _, kv := range strings.Split(clusterLabels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = v
		}
		var clusters []*v1alpha1.Cluster
		for _, name := range []string{"c2", "c0", "c1", "c0"} {
			clusters = append(clusters, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, Labels: l}})
		}
		clusters = append(clusters, nil, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "c9", Labels: l}})
		groups := []*v1alpha1.ClusterGroup{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "default"}, Spec: v1alpha1.ClusterGroupSpec{Selector: sel}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "g"}, Spec: v1alpha1.ClusterGroupSpec{Selector: sel}},
			nil,
		}
		matches, _ := Resolve(op, clusters, groups)
		seen := map[*v1alpha1.Cluster]bool{}
		for _, m := range matches {
			if m.Cluster == nil || m.Cluster.Namespace != "ws" {
				t.Fatalf("match of a Cluster outside the HelmOp's namespace: %+v", m.Cluster)
			}
			if seen[m.Cluster] {
				t.Fatalf("Cluster %s matched twice", m.Cluster.Name)
			}
			seen[m.Cluster] = true
			if m.Options.Namespace == "" {
				t.Fatalf("match of %s has no destination namespace", m.Cluster.Name)
			}
			keys := map[string]bool{}
			for _, r := range m.Options.Resources {
				if keys[ResourceKey(r)] {
					t.Fatalf("match of %s lists %s twice", m.Cluster.Name, ResourceKey(r))
				}
				keys[ResourceKey(r)] = true
			}
		}
		if !sort.SliceIsSorted(matches, func(i, j int) bool { return matches[i].Cluster.Name < matches[j].Cluster.Name }) {
			t.Fatal("matches not sorted by cluster name")
		}
	})
}
