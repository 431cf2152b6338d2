package copyview

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// inputsFrom builds Inputs over indexers holding the given objects, the way
// informers would hold them (sources as metadata only).
func inputsFrom(t testing.TB, objs ...any) Inputs {
	t.Helper()
	return newCaches(t, objs...).inputs()
}

// caches are the indexers informers would fill; helmOps has ListedIndex,
// as NewController adds it.
type caches struct {
	helmOps, bundles, clusters, groups, secrets, configMaps cache.Indexer
}

func newCaches(t testing.TB, objs ...any) *caches {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	c := &caches{helmOps: idx(), bundles: idx(), clusters: idx(), groups: idx(), secrets: idx(), configMaps: idx()}
	for _, i := range []cache.Indexer{c.helmOps, c.bundles} {
		if err := i.AddIndexers(cache.Indexers{ListedIndex: indexListed}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		if err := c.indexerFor(o).Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// indexerFor returns the indexer that holds objects like o.
func (c *caches) indexerFor(o any) cache.Indexer {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	switch o := o.(type) {
	case *fleet.HelmOp:
		return c.helmOps
	case *fleet.Bundle:
		return c.bundles
	case *fleet.Cluster:
		return c.clusters
	case *fleet.ClusterGroup:
		return c.groups
	case *metav1.PartialObjectMetadata:
		if o.Kind == "Secret" {
			return c.secrets
		}
		return c.configMaps
	}
	panic(fmt.Sprintf("unexpected object %T", o))
}

func (c *caches) inputs() Inputs {
	in := Inputs{
		HelmOps:       fleetlisters.NewHelmOpLister(c.helmOps),
		Clusters:      fleetlisters.NewClusterLister(c.clusters),
		ClusterGroups: fleetlisters.NewClusterGroupLister(c.groups),
		Secrets:       cache.NewGenericLister(c.secrets, corev1.Resource("secrets")),
		ConfigMaps:    cache.NewGenericLister(c.configMaps, corev1.Resource("configmaps")),
	}
	if c.bundles != nil {
		in.Bundles = fleetlisters.NewBundleLister(c.bundles)
	}
	return in
}

func helmOp(name string, opts fleet.BundleDeploymentOptions, targets ...fleet.BundleTarget) *fleet.HelmOp {
	return &fleet.HelmOp{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name},
		Spec:       fleet.HelmOpSpec{BundleDeploymentOptions: opts, Targets: targets},
	}
}

func cluster(name string, labels map[string]string) *fleet.Cluster {
	return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, Labels: labels}}
}

func source(kind, name, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: kind, APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, ResourceVersion: rv},
	}
}

var defaultGroup = &fleet.ClusterGroup{
	ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "default"},
	Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}},
}

// row is the part of a row the table below checks.
type row struct {
	name, cluster, kind, source, namespace, rv string
	phase                                      courier.CopyPhase
	message                                    string // substring
}

func TestCompute(t *testing.T) {
	res := func(kind, name string) fleet.DownstreamResource {
		return fleet.DownstreamResource{Kind: kind, Name: name}
	}
	tests := []struct {
		name string
		objs []any
		want []row
	}{
		{
			name: "no targets: every cluster of the default group, one row per resource",
			objs: []any{
				helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: "apps", DownstreamResources: []fleet.DownstreamResource{res("Secret", "creds"), res("configmap", "settings")}}),
				cluster("c1", nil), cluster("c2", nil), defaultGroup,
				source("Secret", "creds", "11"), source("ConfigMap", "settings", "12"),
			},
			want: []row{
				{name: "app.c1.configmap.settings", cluster: "c1", kind: "ConfigMap", source: "settings", namespace: "apps", rv: "12", phase: courier.CopyPhasePending},
				{name: "app.c1.secret.creds", cluster: "c1", kind: "Secret", source: "creds", namespace: "apps", rv: "11", phase: courier.CopyPhasePending},
				{name: "app.c2.configmap.settings", cluster: "c2", kind: "ConfigMap", source: "settings", namespace: "apps", rv: "12", phase: courier.CopyPhasePending},
				{name: "app.c2.secret.creds", cluster: "c2", kind: "Secret", source: "creds", namespace: "apps", rv: "11", phase: courier.CopyPhasePending},
			},
		},
		{
			name: "no default group: no rows",
			objs: []any{
				helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{res("Secret", "creds")}}),
				cluster("c1", nil), source("Secret", "creds", "1"),
			},
		},
		{
			name: "missing source and unsupported kind are rows with their own phase",
			objs: []any{
				helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{res("Secret", "absent"), res("Deployment", "web"), res("ConfigMap", "")}}),
				cluster("c1", nil), defaultGroup,
			},
			want: []row{
				{name: RowName("app", "c1", "ConfigMap", ""), cluster: "c1", kind: "ConfigMap", namespace: "default", phase: courier.CopyPhaseInvalid, message: "no name"},
				{name: "app.c1.deployment.web", cluster: "c1", kind: "Deployment", source: "web", namespace: "default", phase: courier.CopyPhaseInvalid, message: `kind "Deployment" cannot be copied`},
				{name: "app.c1.secret.absent", cluster: "c1", kind: "Secret", source: "absent", namespace: "default", phase: courier.CopyPhaseSourceMissing, message: "Secret fleet-default/absent does not exist"},
			},
		},
		{
			name: "a Secret and a ConfigMap of the same name are told apart",
			objs: []any{
				helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{res("Secret", "x"), res("ConfigMap", "x")}}),
				cluster("c1", nil), defaultGroup, source("ConfigMap", "x", "5"),
			},
			want: []row{
				{name: "app.c1.configmap.x", cluster: "c1", kind: "ConfigMap", source: "x", namespace: "default", rv: "5", phase: courier.CopyPhasePending},
				{name: "app.c1.secret.x", cluster: "c1", kind: "Secret", source: "x", namespace: "default", phase: courier.CopyPhaseSourceMissing},
			},
		},
		{
			name: "per-target resources and namespaces only where that target matched",
			objs: []any{
				helmOp("app", fleet.BundleDeploymentOptions{DefaultNamespace: "base", DownstreamResources: []fleet.DownstreamResource{res("Secret", "shared")}},
					fleet.BundleTarget{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
						BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "prod-ns", DownstreamResources: []fleet.DownstreamResource{res("Secret", "prod-only"), res("secret", "shared")}}},
					fleet.BundleTarget{Name: "rest", ClusterGroup: "default"}),
				cluster("dev", map[string]string{"env": "dev"}), cluster("prod", map[string]string{"env": "prod"}), defaultGroup,
				source("Secret", "shared", "1"), source("Secret", "prod-only", "2"),
			},
			want: []row{
				{name: "app.dev.secret.shared", cluster: "dev", kind: "Secret", source: "shared", namespace: "base", rv: "1", phase: courier.CopyPhasePending},
				{name: "app.prod.secret.prod-only", cluster: "prod", kind: "Secret", source: "prod-only", namespace: "prod-ns", rv: "2", phase: courier.CopyPhasePending},
				{name: "app.prod.secret.shared", cluster: "prod", kind: "Secret", source: "shared", namespace: "prod-ns", rv: "1", phase: courier.CopyPhasePending},
			},
		},
		{
			name: "sources are looked up in the HelmOp's namespace only",
			objs: []any{
				helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{res("Secret", "creds")}}),
				cluster("c1", nil), defaultGroup,
				&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "creds"}},
			},
			want: []row{
				{name: "app.c1.secret.creds", cluster: "c1", kind: "Secret", source: "creds", namespace: "default", phase: courier.CopyPhaseSourceMissing},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, _, err := Compute(inputsFrom(t, tc.objs...))
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for _, r := range rows {
				got = append(got, row{
					name: r.Name, cluster: r.Spec.Cluster, kind: r.Spec.Source.Kind, source: r.Spec.Source.Name,
					namespace: r.Spec.Target.Namespace, rv: r.Spec.Source.ResourceVersion, phase: r.Status.Phase,
				})
				if r.Namespace != "fleet-default" || r.Spec.HelmOp != "app" || r.Spec.Target.Name != r.Spec.Source.Name {
					t.Errorf("row %s: namespace %q, helmOp %q, target name %q", r.Name, r.Namespace, r.Spec.HelmOp, r.Spec.Target.Name)
				}
				if len(r.Status.Conditions) != 1 || r.Status.Conditions[0].Type != courier.ConditionReady || r.Status.Conditions[0].Reason != string(r.Status.Phase) {
					t.Errorf("row %s: conditions %+v", r.Name, r.Status.Conditions)
				}
			}
			// Compare messages as substrings, the rest exactly.
			for i := range tc.want {
				if i < len(rows) && !strings.Contains(rows[i].Status.Message, tc.want[i].message) {
					t.Errorf("row %s: message %q does not contain %q", rows[i].Name, rows[i].Status.Message, tc.want[i].message)
				}
				tc.want[i].message = ""
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestComputeRowIdentityIsStable(t *testing.T) {
	in := inputsFrom(t, helmOp("app", fleet.BundleDeploymentOptions{DownstreamResources: []fleet.DownstreamResource{{Kind: "Secret", Name: "s"}}}),
		cluster("c1", nil), defaultGroup)
	a, _, _ := Compute(in)
	b, _, _ := Compute(in)
	if len(a) != 1 || a[0].UID == "" || a[0].UID != b[0].UID {
		t.Fatalf("UIDs not stable: %v", []any{a, b})
	}
	want := map[string]string{LabelHelmOp: "app", LabelCluster: "c1", LabelSourceKind: "secret", courier.LabelDeliver: "true"}
	if !reflect.DeepEqual(a[0].Labels, want) {
		t.Errorf("labels = %v, want %v", a[0].Labels, want)
	}
}

func TestRowName(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct {
		name                  string
		op, cl, kind, src     string
		want                  string
		wantLen, wantHashTail bool
	}{
		{name: "plain, kind in lower case", op: "app", cl: "prod-1", kind: "Secret", src: "creds", want: "app.prod-1.secret.creds"},
		{name: "a source name with dots stays plain", op: "app", cl: "prod-1", kind: "Secret", src: "example.com-tls", want: "app.prod-1.secret.example.com-tls"},
		{name: "odd characters: readable and hashed", op: "app", cl: "c1", kind: "Foo_Bar", src: "x", want: "app.c1.foo-bar.x.aaebc6dcdcd7fed9"},
		{name: "empty part: readable and hashed", op: "app", cl: "c1", kind: "ConfigMap", src: "", want: "app.c1.configmap.x.99288c3454890d0e"},
		{name: "dots in the HelmOp", op: "a.b", cl: "c", kind: "Secret", src: "s", want: "a-b.c.secret.s.0abc4a171658c327"},
		{name: "long names are cut and hashed", op: long, cl: "c1", kind: "Secret", src: "x", wantLen: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RowName(tc.op, tc.cl, tc.kind, tc.src)
			if tc.wantLen {
				if len(got) > 253 || got == RowName(tc.op, "c2", tc.kind, tc.src) || RowName("a", "b.c", "Secret", "s") == RowName("a.b", "c", "Secret", "s") {
					t.Fatalf("RowName = %q (len %d): too long or not unique", got, len(got))
				}
				return
			}
			if got != tc.want {
				t.Errorf("RowName = %q, want %q", got, tc.want)
			}
		})
	}
}

// A destination namespace that no namespace can be named (over 63
// characters, upper case, "_") makes the row Invalid and not copyable: the
// engine would otherwise retry creating it forever while the row said
// Pending. (Found by make chaos's bad-input catalogue.)
func TestInvalidDestinationNamespace(t *testing.T) {
	for ns, want := range map[string]bool{
		"apps":                  true,
		strings.Repeat("n", 63): true,
		strings.Repeat("n", 64): false,
		"Not_A_Namespace":       false,
		"":                      false,
	} {
		spec := courier.DownstreamCopySpec{Cluster: "c1", Source: courier.CopySource{Kind: "Secret", Name: "s", ResourceVersion: "1"},
			Target: courier.CopyTarget{Namespace: ns, Name: "s"}}
		if got := copycontract.Copyable(spec); got != want {
			t.Errorf("Copyable with namespace %q = %v, want %v", ns, got, want)
		}
		st := rowstatus.Base("ws", spec)
		if want && st.Phase != courier.CopyPhasePending {
			t.Errorf("namespace %q: %s %q, want Pending", ns, st.Phase, st.Message)
		}
		if !want && (st.Phase != courier.CopyPhaseInvalid || !strings.Contains(st.Message, "destination namespace")) {
			t.Errorf("namespace %q: %s %q, want Invalid naming the destination namespace", ns, st.Phase, st.Message)
		}
	}
}

// Compute returns every row of every HelmOp (a test helper), sorted by namespace and name,
// with the phase Courier can tell without a copy engine (see
// ComputeHelmOp). The controller computes one HelmOp at a time; Compute is
// the whole view at once, for tests and benchmarks.
func Compute(in Inputs) ([]*courier.DownstreamCopy, []Problem, error) {
	ctx := context.Background()
	ops, err := in.HelmOps.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	var rows []*courier.DownstreamCopy
	var problems []Problem
	workspaces := map[string]*workspace{}
	for _, op := range ops {
		ws, ok := workspaces[op.Namespace]
		if !ok {
			if ws, err = listWorkspace(in, op.Namespace); err != nil {
				return nil, nil, err
			}
			workspaces[op.Namespace] = ws
		}
		opRows, opProblems, err := computeRows(ctx, in, helmOpOwner(op), ws)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, opRows...)
		problems = append(problems, opProblems...)
	}
	sortRows(rows)
	return dedupe(rows), problems, nil
}
