package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
)

// downstream returns an admin client for downstream cluster i (0-based):
// workspace Cluster c<i+1> reaches it.
func downstream(t *testing.T, i int) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.Downstreams[i].Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor waits up to timeout until cond holds for an object in downstream
// cluster i (nil when it does not exist), read with get.
func waitFor[T any](t *testing.T, i int, ns, name string, timeout time.Duration, what string,
	get func(ctx context.Context, c kubernetes.Interface) (*T, error), cond func(*T) bool) {
	t.Helper()
	c := downstream(t, i)
	var last *T
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		obj, err := get(ctx, c)
		switch {
		case apierrors.IsNotFound(err):
			last = nil
		case err != nil:
			return false, nil
		default:
			last = obj
		}
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("downstream-%d %T %s/%s: %s not reached within %s; last seen: %+v", i+1, last, ns, name, what, timeout, last)
	}
}

// waitSecret waits until cond holds for the Secret in downstream cluster i.
func waitSecret(t *testing.T, i int, ns, name string, timeout time.Duration, what string, cond func(*corev1.Secret) bool) {
	t.Helper()
	waitFor(t, i, ns, name, timeout, what, func(ctx context.Context, c kubernetes.Interface) (*corev1.Secret, error) {
		return c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}, cond)
}

// waitConfigMap waits until cond holds for the ConfigMap in downstream
// cluster i.
func waitConfigMap(t *testing.T, i int, ns, name string, timeout time.Duration, what string, cond func(*corev1.ConfigMap) bool) {
	t.Helper()
	waitFor(t, i, ns, name, timeout, what, func(ctx context.Context, c kubernetes.Interface) (*corev1.ConfigMap, error) {
		return c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}, cond)
}

func secretData(key, value string) func(*corev1.Secret) bool {
	return func(s *corev1.Secret) bool { return s != nil && string(s.Data[key]) == value }
}

func absentSecret(s *corev1.Secret) bool { return s == nil }

// stays checks that cond holds for the whole of d.
func stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s did not hold", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestCopies follows Fleet's own end-to-end cases: copies with their data
// and type, changes propagated, new keys, drift repaired, entries removed,
// HelmOp deleted.
func TestCopies(t *testing.T) {
	w := newWorkspace(t, "ws-copies", nil, nil)
	w.apply(selectAll("default"))
	dest := "copies-dest"
	w.apply(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "registry", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "n"}},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {0, 1}}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/registry", "configmap/settings")}))
	w.waitRows(metav1.ListOptions{}, "c1/ConfigMap/settings@"+dest+"=Synced", "c1/Secret/registry@"+dest+"=Synced",
		"c2/ConfigMap/settings@"+dest+"=Synced", "c2/Secret/registry@"+dest+"=Synced")

	for i := range env.Downstreams {
		s, err := downstream(t, i).CoreV1().Secrets(dest).Get(context.Background(), "registry", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Type != corev1.SecretTypeDockerConfigJson || string(s.Data[corev1.DockerConfigJsonKey]) != `{"auths":{}}` {
			t.Errorf("downstream-%d copy: type %q data %q", i+1, s.Type, s.Data)
		}
		if s.Labels["team"] != "a" || s.Labels[copyspec.LabelManagedBy] != "courier" || s.Labels[copyspec.LabelOwner] == "" {
			t.Errorf("downstream-%d copy labels: %v", i+1, s.Labels)
		}
		if s.Annotations["note"] != "n" || s.Annotations[copyspec.AnnotationHelmOp] != w.ns+"/app" || s.Annotations[copyspec.AnnotationUpstream] == "" ||
			s.Annotations[copyspec.AnnotationSourceResourceVersion] == "" {
			t.Errorf("downstream-%d copy annotations: %v", i+1, s.Annotations)
		}
		if _, ok := s.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			t.Errorf("downstream-%d copy carries the source's last-applied-configuration", i+1)
		}
		waitConfigMap(t, i, dest, "settings", 5*time.Second, "data and binaryData", func(m *corev1.ConfigMap) bool {
			return m != nil && m.Data["a"] == "1" && len(m.BinaryData["b"]) == 2
		})
	}

	t.Run("a source change and a new key reach every cluster within 10s", func(t *testing.T) {
		w.t = t
		w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "2", "new": "key"}})
		for i := range env.Downstreams {
			waitConfigMap(t, i, dest, "settings", 10*time.Second, "a=2 and new=key", func(m *corev1.ConfigMap) bool {
				return m != nil && m.Data["a"] == "2" && m.Data["new"] == "key" && len(m.BinaryData) == 0
			})
		}
	})
	t.Run("a copy deleted or edited downstream is put back", func(t *testing.T) {
		ctx := context.Background()
		d := downstream(t, 0)
		if err := d.CoreV1().Secrets(dest).Delete(ctx, "registry", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSecret(t, 0, dest, "registry", 10*time.Second, "recreated", secretData(corev1.DockerConfigJsonKey, `{"auths":{}}`))
		s, err := d.CoreV1().Secrets(dest).Get(ctx, "registry", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"evil":{}}}`)
		if _, err := d.CoreV1().Secrets(dest).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSecret(t, 0, dest, "registry", 10*time.Second, "restored", secretData(corev1.DockerConfigJsonKey, `{"auths":{}}`))
	})
	t.Run("an entry removed from the list is pruned", func(t *testing.T) {
		w.t = t
		w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/registry")}))
		for i := range env.Downstreams {
			waitConfigMap(t, i, dest, "settings", 10*time.Second, "removed", func(m *corev1.ConfigMap) bool { return m == nil })
			waitSecret(t, i, dest, "registry", time.Second, "still there", secretData(corev1.DockerConfigJsonKey, `{"auths":{}}`))
		}
	})
	t.Run("deleting the HelmOp removes its copies; the source stays", func(t *testing.T) {
		if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range env.Downstreams {
			waitSecret(t, i, dest, "registry", 10*time.Second, "removed", absentSecret)
		}
		if _, err := w.c.kube.CoreV1().Secrets(w.ns).Get(context.Background(), "registry", metav1.GetOptions{}); err != nil {
			t.Errorf("source: %v", err)
		}
	})
}

func TestKeepResources(t *testing.T) {
	w := newWorkspace(t, "ws-keep", nil)
	w.apply(selectAll("default"))
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, StringData: map[string]string{"k": "v"}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dropped"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("keeper", fleet.BundleDeploymentOptions{TargetNamespace: "keep-dest", KeepResources: true, DownstreamResources: resources("Secret/kept")}))
	w.apply(helmOp("dropper", fleet.BundleDeploymentOptions{TargetNamespace: "keep-dest", DownstreamResources: resources("Secret/dropped")}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/dropped@keep-dest=Synced", "c1/Secret/kept@keep-dest=Synced")

	for _, name := range []string{"keeper", "dropper"} {
		if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The sweep that removes "dropped" has run by the time it is gone; "kept"
	// must still be there then, and stay.
	waitSecret(t, 0, "keep-dest", "dropped", 10*time.Second, "removed", absentSecret)
	d := downstream(t, 0)
	stays(t, 3*time.Second, "the keepResources copy stays", func() bool {
		_, err := d.CoreV1().Secrets("keep-dest").Get(context.Background(), "kept", metav1.GetOptions{})
		return err == nil
	})
	// The kept copy keeps a row, phase Kept, until it is gone downstream.
	w.waitRows(metav1.ListOptions{}, "c1/Secret/kept@keep-dest=Kept")
	if out := kubectl(t, "get", "dcp", "-n", w.ns, "-o", "wide"); !strings.Contains(out, "written with keepResources and nothing lists it any more") {
		t.Errorf("the Kept row does not say why:\n%s", out)
	}
	if err := d.CoreV1().Secrets("keep-dest").Delete(context.Background(), "kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitRows(metav1.ListOptions{})
}

func TestLateSourceAndPerTargetResources(t *testing.T) {
	w := newWorkspace(t, "ws-late", map[string]string{"env": "dev"}, map[string]string{"env": "prod"})
	w.apply(selectAll("default"))
	dest := "late-dest"
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/root")},
		fleet.BundleTarget{ClusterName: "c1", BundleDeploymentOptions: fleet.BundleDeploymentOptions{DownstreamResources: resources("Secret/only-c1")}},
		fleet.BundleTarget{ClusterGroup: "default"}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/only-c1@"+dest+"=SourceMissing", "c1/Secret/root@"+dest+"=SourceMissing", "c2/Secret/root@"+dest+"=SourceMissing")
	waitSecret(t, 0, dest, "root", time.Second, "absent before the source exists", absentSecret)

	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "root"}, StringData: map[string]string{"k": "root"}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "only-c1"}, StringData: map[string]string{"k": "c1"}})
	waitSecret(t, 0, dest, "root", 10*time.Second, "root copied to c1", secretData("k", "root"))
	waitSecret(t, 1, dest, "root", 10*time.Second, "root copied to c2", secretData("k", "root"))
	waitSecret(t, 0, dest, "only-c1", 10*time.Second, "per-target copied to c1", secretData("k", "c1"))
	waitSecret(t, 1, dest, "only-c1", time.Second, "per-target not in c2", absentSecret)

	t.Run("a deleted source leaves its copies and shows SourceMissing", func(t *testing.T) {
		w.t = t
		if err := w.c.kube.CoreV1().Secrets(w.ns).Delete(context.Background(), "root", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitRows(metav1.ListOptions{FieldSelector: "spec.source.name=root"}, "c1/Secret/root@"+dest+"=SourceMissing", "c2/Secret/root@"+dest+"=SourceMissing")
		waitSecret(t, 0, dest, "root", time.Second, "copy kept", secretData("k", "root"))
	})
}

func TestConflictAndInvalidRows(t *testing.T) {
	w := newWorkspace(t, "ws-conflict", nil)
	w.apply(selectAll("default"))
	dest := "conflict-dest"
	ctx := context.Background()
	d := downstream(t, 0)
	if _, err := d.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: dest}, StringData: map[string]string{"k": "theirs"}}
	if _, err := d.CoreV1().Secrets(dest).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, StringData: map[string]string{"k": "ours"}})
	w.apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fine"}, Data: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest,
		DownstreamResources: resources("Secret/shared", "Deployment/web", "Secret/missing", "ConfigMap/fine")}))
	w.waitRows(metav1.ListOptions{}, "c1/ConfigMap/fine@"+dest+"=Synced", "c1/Deployment/web@"+dest+"=Invalid",
		"c1/Secret/missing@"+dest+"=SourceMissing", "c1/Secret/shared@"+dest+"=Conflict")
	stays(t, 10*time.Second, "the object Courier does not own is unchanged", func() bool {
		s, err := d.CoreV1().Secrets(dest).Get(ctx, "shared", metav1.GetOptions{})
		return err == nil && string(s.Data["k"]) == "theirs" && s.Labels[copyspec.LabelManagedBy] == ""
	})
	msg := w.messages()
	for _, want := range []string{"not managed by Courier", `kind "Deployment" cannot be copied`, "does not exist"} {
		if !strings.Contains(msg, want) {
			t.Errorf("row messages lack %q:\n%s", want, msg)
		}
	}
	// Deleting the HelmOp never deletes what Courier does not own.
	if err := fleetClient(t).FleetV1alpha1().HelmOps(w.ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigMap(t, 0, dest, "fine", 10*time.Second, "removed", func(m *corev1.ConfigMap) bool { return m == nil })
	waitSecret(t, 0, dest, "shared", time.Second, "untouched", secretData("k", "theirs"))
}

func TestUntargetedClusterLosesItsCopies(t *testing.T) {
	w := newWorkspace(t, "ws-relabel", map[string]string{"env": "prod"}, map[string]string{"env": "prod"})
	dest := "relabel-dest"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")},
		fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}))
	waitSecret(t, 0, dest, "s", 10*time.Second, "copied", secretData("k", "v"))
	waitSecret(t, 1, dest, "s", 10*time.Second, "copied", secretData("k", "v"))
	w.apply(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: map[string]string{"env": "dev"}}, Spec: fleet.ClusterSpec{KubeConfigSecret: "c1-kubeconfig"}})
	waitSecret(t, 0, dest, "s", 10*time.Second, "removed from the untargeted cluster", absentSecret)
	waitSecret(t, 1, dest, "s", time.Second, "kept in the targeted cluster", secretData("k", "v"))
}

// TestUnreachableCluster stops one downstream kube-apiserver: its rows turn
// Unreachable, the other cluster still gets changes, and it converges when
// it is back.
func TestUnreachableCluster(t *testing.T) {
	w := newWorkspace(t, "ws-unreachable", nil, nil)
	w.apply(selectAll("default"))
	dest := "unreachable-dest"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "1"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s")}))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced", "c2/Secret/s@"+dest+"=Synced")

	down := env.Downstreams[1]
	down.Stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = down.Start(context.Background())
		}
	})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "2"}})
	waitSecret(t, 0, dest, "s", 10*time.Second, "change reached the reachable cluster", secretData("k", "2"))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced", "c2/Secret/s@"+dest+"=Unreachable")

	if err := down.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitSecret(t, 1, dest, "s", 60*time.Second, "converged after restart", secretData("k", "2"))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/s@"+dest+"=Synced", "c2/Secret/s@"+dest+"=Synced")
}
