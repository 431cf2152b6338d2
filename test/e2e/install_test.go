package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The install tests check what a user installs with, against the suite's
// real kube-apiserver: `helm lint`, `helm template | kubectl apply
// --dry-run=server` for the chart, and the plain manifests with the Secret
// and APIService that hack/servingcert writes. helm is built from source by
// hack/build-helm.sh; `make test-e2e` passes its bin dir in COURIER_HELM_BIN.

const installNamespace = "courier-system"

// helm runs the helm of COURIER_HELM_BIN with a private home, so that no
// user configuration or repository cache changes what it does.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	dir := os.Getenv("COURIER_HELM_BIN")
	if dir == "" {
		t.Fatal("COURIER_HELM_BIN is not set: run `make test-e2e`, or set it to the directory hack/build-helm.sh prints")
	}
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("COURIER_HELM_BIN=%s has no helm (%v): run hack/build-helm.sh", dir, err)
	}
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		// helm template never contacts a cluster; lint neither. Point any
		// accidental use at nothing rather than at the user's cluster.
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// chartDir is the chart, relative to repoRoot (helm runs there).
const chartDir = "artifacts/chart"

// givenCABundle stands for the caBundle a user passes with an existing
// Secret; the chart copies it into the APIService as it is.
var givenCABundle = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\n"))

// existingSecretValues install with a Secret the user made (e.g. by
// cert-manager) and without CRDs, as where Fleet is installed.
var existingSecretValues = []string{
	"--set", "crds.install=false",
	"--set", "servingCert.existingSecret=my-serving-cert",
	"--set", "servingCert.caBundle=" + givenCABundle,
}

func TestHelmLint(t *testing.T) {
	for name, values := range map[string][]string{"defaults": nil, "existing secret without CRDs": existingSecretValues} {
		t.Run(name, func(t *testing.T) {
			out := helm(t, append([]string{"lint", "--strict", chartDir}, values...)...)
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint:\n%s", out)
			}
		})
	}
	t.Run("existing secret without caBundle is refused", func(t *testing.T) {
		out, err := helmErr(t, "template", "courier", chartDir, "-n", installNamespace, "--set", "servingCert.existingSecret=x")
		if err == nil || !strings.Contains(out, "servingCert.caBundle") {
			t.Errorf("want an error naming servingCert.caBundle, got err=%v:\n%s", err, out)
		}
	})
	t.Run("agents' flow control without subjects is refused", func(t *testing.T) {
		out, err := helmErr(t, "template", "courier", chartDir, "-n", installNamespace,
			"--set", "agentFlowControl.groups=null", "--set", "agentFlowControl.serviceAccountNamespaces=null")
		if err == nil || !strings.Contains(out, "agentFlowControl") {
			t.Errorf("want an error naming agentFlowControl, got err=%v:\n%s", err, out)
		}
	})
	t.Run("two replicas without leader election are refused", func(t *testing.T) {
		out, err := helmErr(t, "template", "courier", chartDir, "-n", installNamespace, "--set", "leaderElection.enabled=false")
		if err == nil || !strings.Contains(out, "leaderElection.enabled") {
			t.Errorf("want an error naming leaderElection.enabled, got err=%v:\n%s", err, out)
		}
	})
}

// helmErr runs helm expecting it may fail; it returns stdout and stderr
// together and the error.
func helmErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(os.Getenv("COURIER_HELM_BIN"), "helm"), args...)
	if os.Getenv("COURIER_HELM_BIN") == "" {
		t.Fatal("COURIER_HELM_BIN is not set: run `make test-e2e`, or set it to the directory hack/build-helm.sh prints")
	}
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHelmTemplateAppliesServerSide renders the chart and has the real
// kube-apiserver validate every object (kubectl apply --dry-run=server:
// schema, defaulting, admission, RBAC escalation checks), with the default
// values and with an existing Secret and no CRDs.
//
// The suite installed Fleet's real CRDs, so with the default values the
// chart's CRDs are an update of existing ones. Plain client-side apply
// validates that update on the server like any other; it is what
// TestArtifactsApplyServerSide does for artifacts/crds too.
func TestHelmTemplateAppliesServerSide(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		rendered := helm(t, "template", "courier", chartDir, "-n", installNamespace)
		out := applyDryRun(t, rendered)
		t.Logf("kubectl apply --dry-run=server:\n%s", out)
		for _, want := range []string{
			"deployment.apps/courier",
			"poddisruptionbudget.policy/courier",
			"apiservice.apiregistration.k8s.io/v1alpha1.courier.dev",
			"service/courier-api",
			"serviceaccount/courier",
			"secret/courier-serving-cert",
			"clusterrole.rbac.authorization.k8s.io/courier",
			"role.rbac.authorization.k8s.io/courier:leader-election",
			"rolebinding.rbac.authorization.k8s.io/courier:leader-election",
			"role.rbac.authorization.k8s.io/courier:sharding",
			"rolebinding.rbac.authorization.k8s.io/courier:sharding",
			"customresourcedefinition.apiextensions.k8s.io/helmops.fleet.cattle.io",
			"customresourcedefinition.apiextensions.k8s.io/clusters.fleet.cattle.io",
			"customresourcedefinition.apiextensions.k8s.io/clustergroups.fleet.cattle.io",
			"validatingadmissionpolicy.admissionregistration.k8s.io/" + admissionPolicyName,
			"validatingadmissionpolicybinding.admissionregistration.k8s.io/" + admissionPolicyName,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server output lacks %s:\n%s", want, out)
			}
		}
		objs := decodeAll(t, rendered)
		checkServingCert(t, find(t, objs, "Secret", "courier-serving-cert"), find(t, objs, "APIService", "v1alpha1.courier.dev"))
		for _, crd := range filterKind(objs, "CustomResourceDefinition") {
			if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD %s would be deleted by helm uninstall (no helm.sh/resource-policy: keep)", crd.GetName())
			}
		}
	})
	t.Run("existing secret without CRDs", func(t *testing.T) {
		rendered := helm(t, append([]string{"template", "courier", chartDir, "-n", installNamespace}, existingSecretValues...)...)
		out := applyDryRun(t, rendered)
		for _, want := range []string{"deployment.apps/courier", "apiservice.apiregistration.k8s.io/v1alpha1.courier.dev", "poddisruptionbudget.policy/courier",
			"validatingadmissionpolicy.admissionregistration.k8s.io/" + admissionPolicyName} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server output lacks %s:\n%s", want, out)
			}
		}
		for _, unwanted := range []string{"customresourcedefinition", "secret/"} {
			if strings.Contains(out, unwanted) {
				t.Errorf("with crds.install=false and an existing Secret the chart still renders %s:\n%s", unwanted, out)
			}
		}
		objs := decodeAll(t, rendered)
		dep := find(t, objs, "Deployment", "courier")
		vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
		if !strings.Contains(fmt.Sprint(vols), "secretName:my-serving-cert") {
			t.Errorf("Deployment does not mount the existing Secret: %v", vols)
		}
		if ca, _, _ := unstructured.NestedString(find(t, objs, "APIService", "v1alpha1.courier.dev").Object, "spec", "caBundle"); ca != givenCABundle {
			t.Errorf("APIService caBundle is %q, not the value given", ca)
		}
	})
	t.Run("field copies", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(`fieldCopy:
  targets: [federatedsecrets.v1beta1.types.kubefed.io]
  namespaces: [team-a, team-b]
  rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["types.kubefed.io"]
    resources: ["federatedsecrets"]
    verbs: ["get", "list", "watch", "update"]
`), 0o600); err != nil {
			t.Fatal(err)
		}
		rendered := helm(t, "template", "courier", chartDir, "-n", installNamespace, "-f", values)
		out := applyDryRun(t, rendered)
		for _, want := range []string{"clusterrole.rbac.authorization.k8s.io/courier:fieldcopy", "clusterrolebinding.rbac.authorization.k8s.io/courier:fieldcopy"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server output lacks %s:\n%s", want, out)
			}
		}
		cs, _, _ := unstructured.NestedSlice(find(t, decodeAll(t, rendered), "Deployment", "courier").Object, "spec", "template", "spec", "containers")
		args := fmt.Sprint(cs[0].(map[string]any)["args"])
		for _, want := range []string{"--fieldcopy-target=federatedsecrets.v1beta1.types.kubefed.io", "--fieldcopy-namespace=team-a", "--fieldcopy-namespace=team-b"} {
			if !strings.Contains(args, want) {
				t.Errorf("Deployment args lack %s: %s", want, args)
			}
		}
		if strings.Contains(args, "--fieldcopy-cross-namespace") {
			t.Errorf("cross-namespace field copies are on without being asked for: %s", args)
		}
		// The flags must be ones the binary knows.
		cmd := exec.Command(courier.Binary(), "--fieldcopy-target=federatedsecrets.v1beta1.types.kubefed.io", "--fieldcopy-namespace=team-a", "--help")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("courier-apiserver refuses the chart's field-copy flags: %v\n%s", err, b)
		}
	})
}

// TestHelmChartMatchesManifests checks that the chart renders the same
// objects as the plain manifests: the same kinds and names, the same
// container arguments, and CRDs identical to artifacts/crds. Only the
// Namespace differs: Helm installs into one (--create-namespace).
func TestHelmChartMatchesManifests(t *testing.T) {
	for _, name := range []string{"helmops.fleet.cattle.io.yaml", "bundles.fleet.cattle.io.yaml", "clusters.fleet.cattle.io.yaml", "clustergroups.fleet.cattle.io.yaml"} {
		a, errA := os.ReadFile(filepath.Join(repoRoot, "artifacts", "crds", name))
		b, errB := os.ReadFile(filepath.Join(repoRoot, chartDir, "files", "crds", name))
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s/files/crds/%s differs from artifacts/crds/%s: copy it over", chartDir, name, name)
		}
	}

	chart := decodeAll(t, helm(t, "template", "courier", chartDir, "-n", installNamespace))
	var plain []*unstructured.Unstructured
	for _, f := range plainManifestFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, decodeAll(t, string(data))...)
	}
	// The servingcert step's Secret (its APIService is apiservice.yaml's).
	plain = append(plain, decodeAll(t, servingCertSecretManifest(t))...)

	ids := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				continue
			}
			out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
		sort.Strings(out)
		return out
	}
	if got, want := ids(chart), ids(plain); !reflect.DeepEqual(got, want) {
		t.Errorf("the chart renders\n  %s\nthe manifests hold\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	args := func(objs []*unstructured.Unstructured) []any {
		cs, _, _ := unstructured.NestedSlice(find(t, objs, "Deployment", "courier").Object, "spec", "template", "spec", "containers")
		if len(cs) != 1 {
			t.Fatalf("Deployment has %d containers, want 1", len(cs))
		}
		a, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "args")
		return a
	}
	if got, want := args(chart), args(plain); !reflect.DeepEqual(got, want) {
		t.Errorf("container args differ:\nchart:     %v\nmanifests: %v", got, want)
	}
}

// TestInstallManifestsApplyServerSide applies the plain install the way
// docs/install.md describes it: artifacts/ plus the Secret and APIService
// that `go run ./hack/servingcert` writes.
func TestInstallManifestsApplyServerSide(t *testing.T) {
	out := t.TempDir()
	servingCert(t, out)
	args := []string{"apply", "--dry-run=server"}
	for _, f := range plainManifestFiles(t) {
		args = append(args, "-f", f)
	}
	args = append(args, "-f", out)
	got := kubectl(t, args...)
	for _, want := range []string{"deployment.apps/courier", "poddisruptionbudget.policy/courier", "secret/courier-serving-cert",
		"apiservice.apiregistration.k8s.io/v1alpha1.courier.dev", "role.rbac.authorization.k8s.io/courier:leader-election",
		"role.rbac.authorization.k8s.io/courier:sharding",
		"validatingadmissionpolicy.admissionregistration.k8s.io/" + admissionPolicyName,
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/" + admissionPolicyName} {
		if !strings.Contains(got, want) {
			t.Errorf("kubectl apply --dry-run=server output lacks %s:\n%s", want, got)
		}
	}
	secret, err := os.ReadFile(filepath.Join(out, "serving-cert-secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := os.ReadFile(filepath.Join(out, "apiservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, string(secret)+"\n---\n"+string(api))
	checkServingCert(t, find(t, objs, "Secret", "courier-serving-cert"), find(t, objs, "APIService", "v1alpha1.courier.dev"))
}

// TestInstallDeploymentFlagsKnown checks that every flag the Deployment
// passes is one the Courier binary under test accepts: an unknown flag
// would crash-loop every pod.
func TestInstallDeploymentFlagsKnown(t *testing.T) {
	binary := os.Getenv("COURIER_BINARY")
	if binary == "" {
		binary = filepath.Join(repoRoot, "_output", "bin", "courier-apiserver")
	}
	help, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", binary, err, help)
	}
	chart := decodeAll(t, helm(t, "template", "courier", chartDir, "-n", installNamespace,
		"--set", "upstreamID=x", "--set", "extraArgs[0]=--alternate-dns=courier.example.com"))
	cs, _, _ := unstructured.NestedSlice(find(t, chart, "Deployment", "courier").Object, "spec", "template", "spec", "containers")
	argv, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	known := func(flag string) bool {
		// pflag's help lists "      --name type" or "  -v, --v Level".
		return strings.Contains(string(help), "      "+flag+" ") || strings.Contains(string(help), ", "+flag+" ")
	}
	var unknown []string
	for _, a := range argv {
		if name, _, _ := strings.Cut(a, "="); !known(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("the Deployment passes %v, which %s does not accept", unknown, filepath.Base(binary))
	}
	// Positive control: the flags the Deployment relies on for high
	// availability are among those checked.
	for _, flag := range []string{"--leader-elect", "--secure-port"} {
		if !slices.ContainsFunc(argv, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") }) {
			t.Errorf("the Deployment does not pass %s: args %v", flag, argv)
		}
	}
}

// servingCert runs hack/servingcert into dir.
func servingCert(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/servingcert", "-namespace", installNamespace, "-out", dir)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./hack/servingcert: %v\n%s", err, out)
	}
}

func servingCertSecretManifest(t *testing.T) string {
	dir := t.TempDir()
	servingCert(t, dir)
	data, err := os.ReadFile(filepath.Join(dir, "serving-cert-secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// plainManifestFiles are the install manifests in artifacts/: everything but
// the charts (templates, not manifests), the examples, and what is installed
// elsewhere (downstream/, agent/). artifacts/admission is the admission
// policy, which the chart renders by default (admissionPolicy.enabled).
func plainManifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"artifacts/*.yaml", "artifacts/rbac/*.yaml", "artifacts/crds/*.yaml", "artifacts/admission/*.yaml", "artifacts/flowcontrol/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no manifests found under artifacts/")
	}
	return files
}

// applyDryRun has the upstream kube-apiserver validate manifests without
// persisting them.
func applyDryRun(t *testing.T, manifests string) string {
	t.Helper()
	// Not t.TempDir: its path holds the test's name, and kubectl -f splits
	// a path at commas.
	dir, err := os.MkdirTemp("", "courier-install-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := filepath.Join(dir, "rendered.yaml")
	if err := os.WriteFile(f, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubectl(t, "apply", "--dry-run=server", "-f", f)
}

// decodeAll splits a multi-document YAML stream into objects.
func decodeAll(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	d := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := d.Decode(&obj); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(obj) == 0 {
			continue // an empty document, e.g. a template that rendered nothing
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

func filterKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range filterKind(objs, kind) {
		if o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

// checkServingCert verifies what the aggregator will: the Secret's
// certificate is valid for courier-api.courier-system.svc, chains to the
// APIService's caBundle, and matches its key.
func checkServingCert(t *testing.T, secret, apiService *unstructured.Unstructured) {
	t.Helper()
	field := func(k string) []byte {
		v, _, _ := unstructured.NestedString(secret.Object, "data", k)
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			t.Fatalf("Secret %s: data[%s] is not base64 PEM (%v)", secret.GetName(), k, err)
		}
		return b
	}
	pair, err := tls.X509KeyPair(field("tls.crt"), field("tls.key"))
	if err != nil {
		t.Fatalf("Secret %s: tls.crt and tls.key: %v", secret.GetName(), err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	caB64, _, _ := unstructured.NestedString(apiService.Object, "spec", "caBundle")
	caPEM, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		t.Fatalf("APIService caBundle: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("APIService caBundle holds no certificate")
	}
	host := "courier-api." + installNamespace + ".svc"
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate does not verify for %s against the APIService's caBundle: %v", host, err)
	}
}
