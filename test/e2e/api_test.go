package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

func TestAPIServiceAvailableAndDiscovery(t *testing.T) {
	dyn, err := dynamic.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := dyn.Resource(apiServiceGVR).Get(context.Background(), "v1alpha1.courier.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructuredSlice(svc.Object, "status", "conditions")
	available := false
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			available = true
		}
	}
	if !available {
		t.Fatalf("APIService v1alpha1.courier.dev is not Available: %v", conds)
	}

	out := kubectl(t, "api-resources", "--api-group=courier.dev", "-o", "wide")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^downstreamcopies\s+dcp\s+courier.dev/v1alpha1\s+true\s+DownstreamCopy\s+get,list,watch\s+courier`),
		regexp.MustCompile(`(?m)^fieldcopies\s+courier.dev/v1alpha1\s+true\s+FieldCopy\s+get,list,watch\s+courier`),
		regexp.MustCompile(`(?m)^downstreamcopysummaries\s+dcs\s+courier.dev/v1alpha1\s+true\s+DownstreamCopySummary\s+get,list,watch\s+courier`),
	} {
		if !want.MatchString(out) {
			t.Errorf("kubectl api-resources does not match %s:\n%s", want, out)
		}
	}
	// The category lists both resources.
	kubectl(t, "get", "courier", "-A")
}

// exampleWorkspace applies artifacts/examples/helmop.yaml into a workspace
// with two Clusters and a default ClusterGroup selecting both.
func exampleWorkspace(t *testing.T, name string) *workspace {
	t.Helper()
	w := newWorkspace(t, name, map[string]string{"env": "dev"}, map[string]string{"env": "prod"})
	w.apply(selectAll("default"))
	example, err := os.ReadFile(filepath.Join(repoRoot, "artifacts", "examples", "helmop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The workspace's own namespace, also as the destination, so tests never
	// write the same downstream object.
	manifest := strings.ReplaceAll(string(example), "namespace: fleet-default", "namespace: "+name)
	manifest = strings.ReplaceAll(manifest, "  namespace: example\n", "  namespace: "+name+"\n")
	path := filepath.Join(t.TempDir(), "helmop.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", path)
	return w
}

// exampleRows are the rows of exampleWorkspace(t, ns) once copied.
func exampleRows(ns string) []string {
	return []string{
		"c1/ConfigMap/example-settings@" + ns + "=Synced", "c1/Secret/example-credentials@" + ns + "=Synced",
		"c2/ConfigMap/example-settings@" + ns + "=Synced", "c2/Secret/example-credentials@" + ns + "=Synced",
	}
}

func TestKubectlGetDownstreamCopies(t *testing.T) {
	w := exampleWorkspace(t, "ws-table")
	w.waitRows(metav1.ListOptions{}, exampleRows(w.ns)...)

	out := kubectl(t, "get", "downstreamcopies", "-A")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Fields(lines[0])
	// kubectl adds the object's NAMESPACE first with -A; the rest are
	// Courier's server-side columns.
	wantHeader := []string{"NAMESPACE", "NAME", "HELMOP", "CLUSTER", "KIND", "SOURCE", "NAMESPACE", "PHASE", "AGE"}
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") {
		t.Fatalf("header = %q, want %q", header, wantHeader)
	}
	var mine []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); f[0] == w.ns {
			mine = append(mine, strings.Join(f[1:8], " "))
		}
	}
	want := []string{
		"example.c1.configmap.example-settings example c1 ConfigMap example-settings ws-table Synced",
		"example.c1.secret.example-credentials example c1 Secret example-credentials ws-table Synced",
		"example.c2.configmap.example-settings example c2 ConfigMap example-settings ws-table Synced",
		"example.c2.secret.example-credentials example c2 Secret example-credentials ws-table Synced",
	}
	if strings.Join(mine, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows of %s:\n%s\nwant:\n%s\nfull output:\n%s", w.ns, strings.Join(mine, "\n"), strings.Join(want, "\n"), out)
	}

	wide := kubectl(t, "get", "dcp", "-n", w.ns, "-o", "wide")
	if h := strings.Fields(strings.SplitN(wide, "\n", 2)[0]); len(h) < 3 || h[len(h)-3] != "MESSAGE" || h[len(h)-2] != "SYNCED-RV" || h[len(h)-1] != "DELIVERED-BY" {
		t.Errorf("-o wide header %q lacks MESSAGE, SYNCED-RV and DELIVERED-BY", h)
	}
	// The suite's one replica holds every bucket: it delivers every row.
	for _, line := range strings.Split(strings.TrimSpace(wide), "\n")[1:] {
		if f := strings.Fields(line); f[len(f)-1] != courier.Name() {
			t.Errorf("-o wide row does not name %s as its deliverer: %s", courier.Name(), line)
		}
	}
	if !strings.Contains(wide, "the copy matches its source") {
		t.Errorf("-o wide shows no message:\n%s", wide)
	}

	// The object itself: spec, status with a Ready condition, no data.
	yaml := kubectl(t, "get", "dcp", "-n", w.ns, "example.c1.secret.example-credentials", "-o", "yaml")
	for _, want := range []string{"helmOp: example", "cluster: c1", "kind: Secret", "name: example-credentials", "namespace: ws-table", "phase: Synced", "syncedResourceVersion:", "type: Ready"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("object lacks %q:\n%s", want, yaml)
		}
	}
	for _, secret := range []string{"change-me", "Y2hhbmdlLW1l"} { // the example's password, plain and base64
		if strings.Contains(yaml, secret) {
			t.Errorf("object holds the secret's data %q:\n%s", secret, yaml)
		}
	}
}

func TestKubectlExplain(t *testing.T) {
	out := kubectl(t, "explain", "downstreamcopies.status.phase")
	if !strings.Contains(out, "Phase is where the copy stands") {
		t.Errorf("kubectl explain shows no field description:\n%s", out)
	}
	out = kubectl(t, "explain", "downstreamcopysummaries.status")
	if !strings.Contains(out, "readyClusters") || !strings.Contains(out, "ReadyClusters is how many of them have every copy Synced") {
		t.Errorf("kubectl explain downstreamcopysummaries.status shows no field description:\n%s", out)
	}
	out = kubectl(t, "explain", "fieldcopies.spec.destinationPath")
	if !strings.Contains(out, "DestinationPath is the path in the target") {
		t.Errorf("kubectl explain fieldcopies shows no field description:\n%s", out)
	}
}

// TestOwnCRDs swaps Fleet's CRDs for Courier's own (artifacts/crds, for
// clusters without Fleet), checks the example's rows are served the same,
// and puts Fleet's back.
func TestOwnCRDs(t *testing.T) {
	w := exampleWorkspace(t, "ws-own-crds")
	w.waitRows(metav1.ListOptions{}, exampleRows(w.ns)...)

	kubectl(t, "replace", "-f", filepath.Join(repoRoot, "artifacts", "crds"))
	t.Cleanup(func() { kubectl(t, "replace", "-f", fleetCRDs) })
	out := kubectl(t, "get", "crd", "helmops.fleet.cattle.io", "-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/part-of}")
	if out != "courier" {
		t.Fatalf("Courier's CRD did not replace Fleet's: part-of label %q", out)
	}
	// A change made while Courier's CRDs serve is seen: a new HelmOp and
	// its rows.
	w.apply(helmOp("second", fleet.BundleDeploymentOptions{TargetNamespace: w.ns + "-second", DownstreamResources: resources("ConfigMap/example-settings")},
		fleet.BundleTarget{ClusterName: "c2"}))
	w.waitRows(metav1.ListOptions{}, append([]string{"c2/ConfigMap/example-settings@" + w.ns + "-second=Synced"}, exampleRows(w.ns)...)...)
	// Fields Courier does not know survive under its own CRDs.
	if helm := kubectl(t, "get", "helmop", "-n", w.ns, "example", "-o", "jsonpath={.spec.helm.chart}"); !strings.Contains(helm, "charts/example") {
		t.Errorf("spec.helm.chart not preserved under Courier's CRD: %q", helm)
	}
}

func unstructuredSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}
