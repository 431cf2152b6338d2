package targeting

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

const ws = "fleet-default"

func cluster(ns, name string, lbls map[string]string) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

func clusterGroup(ns, name string, lbls map[string]string, sel *metav1.LabelSelector) *v1alpha1.ClusterGroup {
	return &v1alpha1.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       v1alpha1.ClusterGroupSpec{Selector: sel},
	}
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func matchExpr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func res(kind, name string) v1alpha1.DownstreamResource {
	return v1alpha1.DownstreamResource{Kind: kind, Name: name}
}

// Fixtures: clusters a, b, c in the workspace, x (like a) elsewhere.
var (
	cA = cluster(ws, "a", map[string]string{"env": "prod", "region": "eu"})
	cB = cluster(ws, "b", map[string]string{"env": "dev", "region": "us"})
	cC = cluster(ws, "c", map[string]string{"env": "prod", "region": "us"})
	cX = cluster("other", "x", map[string]string{"env": "prod", "region": "eu"})
	// cBare has no labels; only the cases that name it use it.
	cBare = cluster(ws, "bare", nil)

	allClusters = []*v1alpha1.Cluster{cA, cB, cC, cX}

	gProd  = clusterGroup(ws, "prod", map[string]string{"tier": "gold"}, matchLabels("env", "prod"))          // a, c
	gEU    = clusterGroup(ws, "eu", map[string]string{"tier": "silver"}, matchLabels("region", "eu"))         // a
	gAll   = clusterGroup(ws, "all", map[string]string{"tier": "bronze"}, &metav1.LabelSelector{})            // a, b, c
	gNone  = clusterGroup(ws, "none", map[string]string{"tier": "bronze"}, nil)                               // nothing
	gUSx   = clusterGroup("other", "us", map[string]string{"tier": "elsewhere"}, matchLabels("region", "us")) // other namespace
	groups = []*v1alpha1.ClusterGroup{gProd, gEU, gAll, gNone, gUSx}

	badSel = matchExpr("env", "Bogus", "prod")
)

func op(root v1alpha1.BundleDeploymentOptions, targets ...v1alpha1.BundleTarget) *v1alpha1.HelmOp {
	return &v1alpha1.HelmOp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "app"},
		Spec:       v1alpha1.HelmOpSpec{BundleDeploymentOptions: root, Targets: targets},
	}
}

// plain are the options of a target that overrides nothing under an empty root.
var plain = Options{Namespace: "default"}

func m(c *v1alpha1.Cluster, target string, o Options) Match {
	return Match{Cluster: c, TargetName: target, Options: o}
}

func TestResolve(t *testing.T) {
	invalidOp := `"Bogus" is not a valid label selector operator`
	tests := []struct {
		name     string
		op       *v1alpha1.HelmOp
		clusters []*v1alpha1.Cluster      // allClusters when nil
		groups   []*v1alpha1.ClusterGroup // groups when nil
		want     []Match
		problems []string
	}{
		{
			name: "clusterName",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "one", ClusterName: "b"}),
			want: []Match{m(cB, "one", plain)},
		},
		{
			name: "clusterName of a cluster in another namespace",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "one", ClusterName: "x"}),
		},
		{
			name: "clusterSelector matchLabels; clusters in other namespaces ignored",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "prod", ClusterSelector: matchLabels("env", "prod")}),
			want: []Match{m(cA, "prod", plain), m(cC, "prod", plain)},
		},
		{
			name: "clusterSelector matchExpressions",
			op: op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "expr", ClusterSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{"us", "ap"}},
					{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}},
				},
			}}),
			want: []Match{m(cC, "expr", plain)},
		},
		{
			name:     "clusterSelector DoesNotExist",
			op:       op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "t", ClusterSelector: matchExpr("region", metav1.LabelSelectorOpDoesNotExist)}),
			clusters: []*v1alpha1.Cluster{cA, cBare},
			want:     []Match{m(cBare, "t", plain)},
		},
		{
			name: "empty clusterSelector matches every cluster",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "all", ClusterSelector: &metav1.LabelSelector{}}),
			want: []Match{m(cA, "all", plain), m(cB, "all", plain), m(cC, "all", plain)},
		},
		{
			name: "clusterName and clusterSelector must both hold",
			op: op(v1alpha1.BundleDeploymentOptions{},
				v1alpha1.BundleTarget{Name: "no", ClusterName: "a", ClusterSelector: matchLabels("env", "dev")},
				v1alpha1.BundleTarget{Name: "yes", ClusterName: "c", ClusterSelector: matchLabels("env", "prod")}),
			want: []Match{m(cC, "yes", plain)},
		},
		{
			name: "clusterGroup",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "g", ClusterGroup: "prod"}),
			want: []Match{m(cA, "g", plain), m(cC, "g", plain)},
		},
		{
			name: "clusterGroup with empty selector matches every cluster",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "g", ClusterGroup: "all"}),
			want: []Match{m(cA, "g", plain), m(cB, "g", plain), m(cC, "g", plain)},
		},
		{
			name: "clusterGroup with nil selector matches nothing",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "g", ClusterGroup: "none"}),
		},
		{
			name: "clusterGroup that does not exist matches nothing",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "g", ClusterGroup: "missing"}),
		},
		{
			name: "clusterGroup in another namespace ignored",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "g", ClusterGroup: "us"}),
		},
		{
			name: "clusterGroupSelector",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "gs", ClusterGroupSelector: matchLabels("tier", "silver")}),
			want: []Match{m(cA, "gs", plain)},
		},
		{
			name: "clusterGroupSelector matching several groups",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "gs", ClusterGroupSelector: matchExpr("tier", metav1.LabelSelectorOpIn, "gold", "silver")}),
			want: []Match{m(cA, "gs", plain), m(cC, "gs", plain)},
		},
		{
			name: "clusterGroupSelector matching only a group in another namespace",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "gs", ClusterGroupSelector: matchLabels("tier", "elsewhere")}),
		},
		{
			name: "clusterGroup and clusterGroupSelector satisfied by different groups",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "both", ClusterGroup: "eu", ClusterGroupSelector: matchLabels("tier", "gold")}),
		},
		{
			name: "clusterGroup and clusterGroupSelector satisfied by one group",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "both", ClusterGroup: "prod", ClusterGroupSelector: matchLabels("tier", "gold")}),
			want: []Match{m(cA, "both", plain), m(cC, "both", plain)},
		},
		{
			name: "clusterSelector and clusterGroup must both hold",
			op:   op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "t", ClusterGroup: "prod", ClusterSelector: matchLabels("region", "us")}),
			want: []Match{m(cC, "t", plain)},
		},
		{
			name: "doNotDeploy excludes and stops fall-through",
			op: op(v1alpha1.BundleDeploymentOptions{},
				v1alpha1.BundleTarget{Name: "skip", ClusterName: "a", DoNotDeploy: true},
				v1alpha1.BundleTarget{Name: "rest", ClusterGroup: "all"}),
			want: []Match{m(cB, "rest", plain), m(cC, "rest", plain)},
		},
		{
			name: "first matching target wins",
			op: op(v1alpha1.BundleDeploymentOptions{},
				v1alpha1.BundleTarget{Name: "prod", ClusterSelector: matchLabels("env", "prod"), BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{TargetNamespace: "p"}},
				v1alpha1.BundleTarget{Name: "eu", ClusterGroup: "eu", BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{TargetNamespace: "e"}},
				v1alpha1.BundleTarget{Name: "rest", ClusterGroup: "all"}),
			want: []Match{m(cA, "prod", Options{Namespace: "p"}), m(cB, "rest", plain), m(cC, "prod", Options{Namespace: "p"})},
		},
		{
			name:   "no targets: implicit default target with a default group",
			op:     op(v1alpha1.BundleDeploymentOptions{ServiceAccount: "sa"}),
			groups: append([]*v1alpha1.ClusterGroup{clusterGroup(ws, "default", nil, matchLabels("env", "prod"))}, groups...),
			want:   []Match{m(cA, "default", Options{Namespace: "default", ServiceAccount: "sa"}), m(cC, "default", Options{Namespace: "default", ServiceAccount: "sa"})},
		},
		{
			name:   "no targets: default group in another namespace ignored",
			op:     op(v1alpha1.BundleDeploymentOptions{}),
			groups: []*v1alpha1.ClusterGroup{clusterGroup("other", "default", nil, &metav1.LabelSelector{})},
		},
		{
			name: "no targets and no default group: nothing, no problem",
			op:   op(v1alpha1.BundleDeploymentOptions{}),
		},
		{
			name: "target with no criteria matches nothing and is reported",
			op: op(v1alpha1.BundleDeploymentOptions{},
				v1alpha1.BundleTarget{Name: "empty", BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{TargetNamespace: "x"}},
				v1alpha1.BundleTarget{Name: "b", ClusterName: "b"}),
			want:     []Match{m(cB, "b", plain)},
			problems: []string{`target "empty": ` + ErrNoCriteria.Error()},
		},
		{
			name: "invalid selectors reported, other targets still match",
			op: op(v1alpha1.BundleDeploymentOptions{},
				v1alpha1.BundleTarget{Name: "bad", ClusterSelector: badSel},
				v1alpha1.BundleTarget{ClusterGroupSelector: badSel},
				v1alpha1.BundleTarget{Name: "prod", ClusterGroup: "prod"},
				v1alpha1.BundleTarget{ClusterName: "b", ClusterSelector: badSel}),
			want: []Match{m(cA, "prod", plain), m(cC, "prod", plain)},
			problems: []string{
				`target "bad": invalid clusterSelector: ` + invalidOp,
				`target "target001": invalid clusterGroupSelector: ` + invalidOp,
				`target "target003": invalid clusterSelector: ` + invalidOp,
			},
		},
		{
			name: "invalid ClusterGroup selector reported once, only when consulted",
			op: op(v1alpha1.BundleDeploymentOptions{},
				v1alpha1.BundleTarget{ClusterName: "b"},
				v1alpha1.BundleTarget{ClusterGroup: "broken"},
				v1alpha1.BundleTarget{ClusterGroupSelector: matchLabels("tier", "broken")},
				v1alpha1.BundleTarget{ClusterGroup: "prod"}),
			groups: append([]*v1alpha1.ClusterGroup{
				clusterGroup(ws, "broken", map[string]string{"tier": "broken"}, badSel),
				clusterGroup(ws, "unused", nil, badSel),
			}, groups...),
			want: []Match{m(cA, "target003", plain), m(cB, "target000", plain), m(cC, "target003", plain)},
			problems: []string{
				`target "target001": ClusterGroup "broken": invalid spec.selector: ` + invalidOp,
			},
		},
		{
			name: "unnamed targets named by index",
			op: op(v1alpha1.BundleDeploymentOptions{},
				v1alpha1.BundleTarget{ClusterName: "a"},
				v1alpha1.BundleTarget{Name: "named", ClusterName: "b"},
				v1alpha1.BundleTarget{ClusterName: "c"}),
			want: []Match{m(cA, "target000", plain), m(cB, "named", plain), m(cC, "target002", plain)},
		},
		{
			name:     "output sorted by cluster name; nil entries skipped",
			op:       op(v1alpha1.BundleDeploymentOptions{}, v1alpha1.BundleTarget{Name: "all", ClusterGroup: "all"}),
			clusters: []*v1alpha1.Cluster{cC, nil, cA, cX, cB},
			groups:   []*v1alpha1.ClusterGroup{nil, gAll},
			want:     []Match{m(cA, "all", plain), m(cB, "all", plain), m(cC, "all", plain)},
		},
		{
			name: "options merged per matching target",
			op: op(v1alpha1.BundleDeploymentOptions{
				DefaultNamespace:    "root-def",
				ServiceAccount:      "root-sa",
				DownstreamResources: []v1alpha1.DownstreamResource{res("Secret", "s"), res("ConfigMap", "cm")},
			},
				v1alpha1.BundleTarget{Name: "a", ClusterName: "a", BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{
					TargetNamespace:     "a-ns",
					ServiceAccount:      "a-sa",
					KeepResources:       true,
					DownstreamResources: []v1alpha1.DownstreamResource{res("secret", "s"), res("Secret", "extra")},
				}},
				v1alpha1.BundleTarget{Name: "rest", ClusterGroup: "all"}),
			want: []Match{
				m(cA, "a", Options{
					Resources:      []v1alpha1.DownstreamResource{res("Secret", "s"), res("ConfigMap", "cm"), res("Secret", "extra")},
					Namespace:      "a-ns",
					ServiceAccount: "a-sa",
					KeepResources:  true,
				}),
				m(cB, "rest", Options{Resources: []v1alpha1.DownstreamResource{res("Secret", "s"), res("ConfigMap", "cm")}, Namespace: "root-def", ServiceAccount: "root-sa"}),
				m(cC, "rest", Options{Resources: []v1alpha1.DownstreamResource{res("Secret", "s"), res("ConfigMap", "cm")}, Namespace: "root-def", ServiceAccount: "root-sa"}),
			},
		},
		{
			name: "nil HelmOp",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clusters, grps := tc.clusters, tc.groups
			if clusters == nil {
				clusters = allClusters
			}
			if grps == nil {
				grps = groups
			}
			want := tc.want

			got, problems := Resolve(tc.op, clusters, grps)

			if !reflect.DeepEqual(got, want) {
				t.Errorf("matches:\n got %s\nwant %s", describe(got), describe(want))
			}
			for i := range got {
				if got[i].Cluster != want[i].Cluster {
					t.Errorf("match %d: Cluster is not the caller's pointer", i)
				}
			}
			var msgs []string
			for _, p := range problems {
				msgs = append(msgs, p.Error())
			}
			if !reflect.DeepEqual(msgs, tc.problems) {
				t.Errorf("problems:\n got %q\nwant %q", msgs, tc.problems)
			}
		})
	}
}

func describe(ms []Match) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "\n  %s/%s -> %s %+v", m.Cluster.Namespace, m.Cluster.Name, m.TargetName, m.Options)
	}
	return b.String()
}

func TestProblemFields(t *testing.T) {
	_, problems := Resolve(op(v1alpha1.BundleDeploymentOptions{},
		v1alpha1.BundleTarget{Name: "bad", ClusterSelector: badSel},
		v1alpha1.BundleTarget{Name: "none"},
		v1alpha1.BundleTarget{Name: "grp", ClusterGroup: "broken"}),
		nil, []*v1alpha1.ClusterGroup{clusterGroup(ws, "broken", nil, badSel)})

	_, wantErr := metav1.LabelSelectorAsSelector(badSel)
	want := []Problem{
		{Target: "bad", Field: "clusterSelector", Err: wantErr},
		{Target: "none", Err: ErrNoCriteria},
		{Target: "grp", Group: "broken", Field: "spec.selector", Err: wantErr},
	}
	if !reflect.DeepEqual(problems, want) {
		t.Fatalf("got %#v\nwant %#v", problems, want)
	}
	if !errors.Is(problems[1], ErrNoCriteria) {
		t.Errorf("errors.Is(%v, ErrNoCriteria) = false", problems[1])
	}
}

func TestMergeOptions(t *testing.T) {
	target := func(o v1alpha1.BundleDeploymentOptions) *v1alpha1.BundleTarget {
		return &v1alpha1.BundleTarget{Name: "t", ClusterName: "a", BundleDeploymentOptions: o}
	}
	tests := []struct {
		name   string
		root   v1alpha1.BundleDeploymentOptions
		target *v1alpha1.BundleTarget
		want   Options
	}{
		{
			name: "nothing set: namespace default",
			want: Options{Namespace: "default"},
		},
		{
			name:   "nil target: root options alone",
			root:   v1alpha1.BundleDeploymentOptions{DefaultNamespace: "d", ServiceAccount: "sa", KeepResources: true, DownstreamResources: []v1alpha1.DownstreamResource{res("Secret", "s")}},
			target: nil,
			want:   Options{Namespace: "d", ServiceAccount: "sa", KeepResources: true, Resources: []v1alpha1.DownstreamResource{res("Secret", "s")}},
		},
		{
			name: "root namespace beats root defaultNamespace",
			root: v1alpha1.BundleDeploymentOptions{TargetNamespace: "ns", DefaultNamespace: "d"},
			want: Options{Namespace: "ns"},
		},
		{
			name:   "target namespace overrides root namespace",
			root:   v1alpha1.BundleDeploymentOptions{TargetNamespace: "root"},
			target: target(v1alpha1.BundleDeploymentOptions{TargetNamespace: "tgt"}),
			want:   Options{Namespace: "tgt"},
		},
		{
			name:   "target namespace beats root defaultNamespace",
			root:   v1alpha1.BundleDeploymentOptions{DefaultNamespace: "root-d"},
			target: target(v1alpha1.BundleDeploymentOptions{TargetNamespace: "tgt"}),
			want:   Options{Namespace: "tgt"},
		},
		{
			name:   "target defaultNamespace overrides root defaultNamespace",
			root:   v1alpha1.BundleDeploymentOptions{DefaultNamespace: "root-d"},
			target: target(v1alpha1.BundleDeploymentOptions{DefaultNamespace: "tgt-d"}),
			want:   Options{Namespace: "tgt-d"},
		},
		{
			name:   "root namespace beats target defaultNamespace",
			root:   v1alpha1.BundleDeploymentOptions{TargetNamespace: "root"},
			target: target(v1alpha1.BundleDeploymentOptions{DefaultNamespace: "tgt-d"}),
			want:   Options{Namespace: "root"},
		},
		{
			name:   "empty target values keep root values",
			root:   v1alpha1.BundleDeploymentOptions{TargetNamespace: "root", ServiceAccount: "root-sa"},
			target: target(v1alpha1.BundleDeploymentOptions{}),
			want:   Options{Namespace: "root", ServiceAccount: "root-sa"},
		},
		{
			name:   "target serviceAccount overrides root",
			root:   v1alpha1.BundleDeploymentOptions{ServiceAccount: "root-sa"},
			target: target(v1alpha1.BundleDeploymentOptions{ServiceAccount: "tgt-sa"}),
			want:   Options{Namespace: "default", ServiceAccount: "tgt-sa"},
		},
		{
			name:   "target serviceAccount without root",
			target: target(v1alpha1.BundleDeploymentOptions{ServiceAccount: "tgt-sa"}),
			want:   Options{Namespace: "default", ServiceAccount: "tgt-sa"},
		},
		{
			name:   "keepResources: root true, target false",
			root:   v1alpha1.BundleDeploymentOptions{KeepResources: true},
			target: target(v1alpha1.BundleDeploymentOptions{KeepResources: false}),
			want:   Options{Namespace: "default", KeepResources: true},
		},
		{
			name:   "keepResources: root false, target true",
			target: target(v1alpha1.BundleDeploymentOptions{KeepResources: true}),
			want:   Options{Namespace: "default", KeepResources: true},
		},
		{
			name:   "keepResources: both false",
			target: target(v1alpha1.BundleDeploymentOptions{}),
			want:   Options{Namespace: "default"},
		},
		{
			name: "resources: union, deduplicated case-insensitively on kind, root order and spelling first",
			root: v1alpha1.BundleDeploymentOptions{DownstreamResources: []v1alpha1.DownstreamResource{
				res("Secret", "a"), res("ConfigMap", "b"), res("secret", "a"),
			}},
			target: target(v1alpha1.BundleDeploymentOptions{DownstreamResources: []v1alpha1.DownstreamResource{
				res("SECRET", "a"), res("ConfigMap", "c"), res("configmap", "b"), res("Secret", "A"),
			}}),
			want: Options{Namespace: "default", Resources: []v1alpha1.DownstreamResource{
				res("Secret", "a"), res("ConfigMap", "b"), res("ConfigMap", "c"), res("Secret", "A"),
			}},
		},
		{
			name: "resources: entries with empty kind or name kept but deduplicated",
			root: v1alpha1.BundleDeploymentOptions{DownstreamResources: []v1alpha1.DownstreamResource{
				res("", "x"), res("Secret", ""),
			}},
			target: target(v1alpha1.BundleDeploymentOptions{DownstreamResources: []v1alpha1.DownstreamResource{
				res("", "x"), res("secret", ""), res("Deployment", "d"), res("", ""),
			}}),
			want: Options{Namespace: "default", Resources: []v1alpha1.DownstreamResource{
				res("", "x"), res("Secret", ""), res("Deployment", "d"), res("", ""),
			}},
		},
		{
			name:   "resources: target only",
			target: target(v1alpha1.BundleDeploymentOptions{DownstreamResources: []v1alpha1.DownstreamResource{res("ConfigMap", "c")}}),
			want:   Options{Namespace: "default", Resources: []v1alpha1.DownstreamResource{res("ConfigMap", "c")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MergeOptions(tc.root, tc.target)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMergeOptionsDoesNotAliasInputs(t *testing.T) {
	root := v1alpha1.BundleDeploymentOptions{DownstreamResources: make([]v1alpha1.DownstreamResource, 1, 4)}
	root.DownstreamResources[0] = res("Secret", "s")
	got := MergeOptions(root, &v1alpha1.BundleTarget{BundleDeploymentOptions: v1alpha1.BundleDeploymentOptions{
		DownstreamResources: []v1alpha1.DownstreamResource{res("ConfigMap", "c")},
	}})
	got.Resources[0].Name = "changed"
	if root.DownstreamResources[0].Name != "s" || root.DownstreamResources[:2][1] != (v1alpha1.DownstreamResource{}) {
		t.Errorf("MergeOptions result aliases the root list: %+v", root.DownstreamResources[:2])
	}
}

func TestResourceKey(t *testing.T) {
	tests := []struct {
		name string
		in   v1alpha1.DownstreamResource
		want string
	}{
		{name: "kind lower-cased", in: res("Secret", "s"), want: "secret/s"},
		{name: "name case kept", in: res("CONFIGMAP", "My-CM"), want: "configmap/My-CM"},
		{name: "empty kind", in: res("", "x"), want: "/x"},
		{name: "empty name", in: res("Secret", ""), want: "secret/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResourceKey(tc.in); got != tc.want {
				t.Errorf("ResourceKey(%+v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
