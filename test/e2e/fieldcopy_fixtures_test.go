package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	courierv1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

// fieldCopyArgs are the shared Courier's field-copy flags (main_test.go).
// The target kinds are CRDs the tests install after Courier started, so
// they resolve late, and each is written in a different form: full
// resource.version.group, kind, singular. Secret sources are on, as the
// chart sets them together with the admission policy; the export rule and
// the policy are what the tests of fieldcopy_export_test.go check.
var fieldCopyArgs = []string{
	"--fieldcopy-target=federatedsecrets.v1.e2e.courier.dev,FederatedDeployment",
	"--fieldcopy-target=secret,configmap",
	"--fieldcopy-secret-sources",
}

var (
	fedSecrets = schema.GroupVersionResource{Group: "e2e.courier.dev", Version: "v1", Resource: "federatedsecrets"}
	fedDeploys = schema.GroupVersionResource{Group: "e2e.courier.dev", Version: "v1", Resource: "federateddeployments"}
	gadgets    = schema.GroupVersionResource{Group: "late.e2e.courier.dev", Version: "v1", Resource: "gadgets"}
	deploysGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// crd returns a namespaced CRD whose spec keeps any fields, like kubefed's
// Federated* kinds (spec.template holds an object of another kind).
func crd(group, kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: %[3]s, singular: %[4]s, kind: %[2]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`, group, kind, plural, strings.ToLower(kind))
}

// installCRD applies a CRD with the real kubectl and waits until it is
// served.
func installCRD(t *testing.T, group, kind, plural string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), plural+".yaml")
	if err := os.WriteFile(f, []byte(crd(group, kind, plural)), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", f)
	if err := env.WaitEstablished(context.Background(), plural+"."+group); err != nil {
		t.Fatal(err)
	}
}

var (
	fieldCopySetupOnce sync.Once
	fieldCopySetupErr  error
)

// fieldCopySetup installs the CRDs the field-copy tests target and grants
// Courier what they need (as an operator would, artifacts/
// examples/fieldcopy-rbac.yaml): read on the source kinds, update on the
// target kinds. Secrets as targets are granted per namespace
// (grantSecretWrites). It returns a dynamic client for the upstream.
func fieldCopySetup(t *testing.T) dynamic.Interface {
	t.Helper()
	fieldCopySetupOnce.Do(func() {
		installCRD(t, "e2e.courier.dev", "FederatedSecret", "federatedsecrets")
		installCRD(t, "e2e.courier.dev", "FederatedDeployment", "federateddeployments")
		ctx := context.Background()
		kube := upstreamClients(t).kube
		roles := []*rbacv1.ClusterRole{
			{ObjectMeta: metav1.ObjectMeta{Name: "courier-e2e-fieldcopy"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"e2e.courier.dev"}, Resources: []string{"federatedsecrets", "federateddeployments"}, Verbs: []string{"get", "list", "watch", "update"}},
				{APIGroups: []string{"late.e2e.courier.dev"}, Resources: []string{"gadgets"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
			}},
			{ObjectMeta: metav1.ObjectMeta{Name: "courier-e2e-secret-writer"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"update"}},
			}},
		}
		for _, r := range roles {
			if _, err := kube.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				fieldCopySetupErr = err
				return
			}
		}
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "courier-e2e-fieldcopy"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "courier", Namespace: "courier-system"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "courier-e2e-fieldcopy"},
		}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			fieldCopySetupErr = err
		}
	})
	if fieldCopySetupErr != nil {
		t.Fatal(fieldCopySetupErr)
	}
	dyn, err := dynamic.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// grantSecretWrites lets Courier update Secrets in ns only.
func grantSecretWrites(t *testing.T, ns string) {
	t.Helper()
	if _, err := upstreamClients(t).kube.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "courier-secret-writer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "courier", Namespace: "courier-system"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "courier-e2e-secret-writer"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fcNamespace creates a namespace deleted when the test ends.
func fcNamespace(t *testing.T, name string) string {
	t.Helper()
	kube := upstreamClients(t).kube
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// object builds an unstructured object of an e2e kind.
func object(gvr schema.GroupVersionResource, kind, ns, name string, annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
	u.SetAnnotations(annotations)
	return u
}

func create(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// field reads the value at path of an object, or nil.
func field(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, path ...string) any {
	t.Helper()
	u, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

// waitField polls until the value at path equals want (compared as JSON
// values), failing after timeout.
func waitField(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, timeout time.Duration, want any, path ...string) {
	t.Helper()
	var got any
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got = field(t, dyn, gvr, ns, name, path...)
		return reflect.DeepEqual(got, want), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s %s after %s:\n got  %v\n want %v\nrows:\n%s", gvr.Resource, ns, name, strings.Join(path, "."), timeout, got, want, fieldCopyMessages(t, ns))
	}
}

// fieldCopyRow returns a row read through the aggregator, or nil.
func fieldCopyRow(t *testing.T, ns, name string) *courierv1.FieldCopy {
	t.Helper()
	r, err := getFieldCopy(t, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// getFieldCopy reads a row through the aggregator: nil when there is no
// such row.
func getFieldCopy(t *testing.T, ns, name string) (*courierv1.FieldCopy, error) {
	t.Helper()
	r, err := upstreamClients(t).courier.CourierV1alpha1().FieldCopies(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return r, err
}

// waitFieldCopy waits until row ns/name is in phase with a message holding
// msg ("" for any message); phase "" waits until the row is gone.
func waitFieldCopy(t *testing.T, ns, name, phase, msg string) *courierv1.FieldCopy {
	t.Helper()
	var r *courierv1.FieldCopy
	eventually(t, fmt.Sprintf("fieldcopy %s/%s %q with %q", ns, name, phase, msg), func() (bool, string) {
		var err error
		r, err = getFieldCopy(t, ns, name)
		if apierrors.IsServiceUnavailable(err) {
			// The aggregator answers 503 while it has no ready endpoint
			// for Courier (just after a test restarted it): wait on.
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return phase == "", "no such row; rows:\n" + fieldCopyMessages(t, ns)
		}
		return string(r.Status.Phase) == phase && strings.Contains(r.Status.Message, msg),
			fmt.Sprintf("%s: %s", r.Status.Phase, r.Status.Message)
	})
	return r
}

// fieldCopyMessages lists a namespace's rows, for failures.
func fieldCopyMessages(t *testing.T, ns string) string {
	list, err := upstreamClients(t).courier.CourierV1alpha1().FieldCopies(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, r := range list.Items {
		fmt.Fprintf(&b, "  %s %s: %s\n", r.Name, r.Status.Phase, r.Status.Message)
	}
	return b.String()
}

// kubectlRows returns `kubectl get fieldcopies -A` as namespace/name -> the
// line's fields.
func kubectlRows(t *testing.T) map[string][]string {
	t.Helper()
	out := kubectl(t, "get", "fieldcopies", "-A")
	rows := map[string][]string{}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 2 {
			continue
		}
		rows[f[0]+"/"+f[1]] = f
	}
	return rows
}

// stripNulls drops object keys holding null, as API servers do when they
// store a copy: a Deployment's pod template has creationTimestamp: null.
func stripNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e != nil {
				out[k] = stripNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = stripNulls(e)
		}
		return out
	}
	return v
}
