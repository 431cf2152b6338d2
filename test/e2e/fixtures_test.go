package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

// clients for the upstream cluster, as its admin. Courier's API is reached
// through the upstream kube-apiserver's aggregator, as users reach it.
type clients struct {
	kube    kubernetes.Interface
	courier versioned.Interface
}

func upstreamClients(t *testing.T) clients {
	t.Helper()
	kube, err := kubernetes.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := versioned.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	return clients{kube: kube, courier: c}
}

// workspace is a Fleet workspace namespace of a test's own, so tests do not
// see each other's HelmOps and Clusters.
type workspace struct {
	t  *testing.T
	ns string
	c  clients
}

// newWorkspace creates a namespace holding one Cluster per downstream
// cluster (named c1, c2, ... with the given labels, each with a kubeconfig
// Secret that reaches its kube-apiserver). It is deleted when the test ends.
func newWorkspace(t *testing.T, name string, clusterLabels ...map[string]string) *workspace {
	t.Helper()
	ctx := context.Background()
	w := &workspace{t: t, ns: name, c: upstreamClients(t)}
	if _, err := w.c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.c.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	for i, labels := range clusterLabels {
		ds := env.Downstreams[i%len(env.Downstreams)]
		kubeconfig, err := os.ReadFile(ds.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cluster := fmt.Sprintf("c%d", i+1)
		w.apply(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: cluster + "-kubeconfig"},
			Data:       map[string][]byte{"value": kubeconfig},
		})
		w.apply(&fleet.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: cluster, Labels: labels},
			Spec:       fleet.ClusterSpec{KubeConfigSecret: cluster + "-kubeconfig"},
		})
	}
	return w
}

// apply creates obj in the workspace, or updates it if it exists.
func (w *workspace) apply(obj metav1.Object) {
	w.t.Helper()
	ctx := context.Background()
	obj.SetNamespace(w.ns)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := w.applyOnce(ctx, obj)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		w.t.Fatalf("applying %T %s: %v", obj, obj.GetName(), err)
	}
}

func (w *workspace) applyOnce(ctx context.Context, obj metav1.Object) error {
	f := fleetClient(w.t)
	switch o := obj.(type) {
	case *corev1.Secret:
		_, err := w.c.kube.CoreV1().Secrets(w.ns).Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = w.c.kube.CoreV1().Secrets(w.ns).Update(ctx, o, metav1.UpdateOptions{})
		}
		return err
	case *corev1.ConfigMap:
		_, err := w.c.kube.CoreV1().ConfigMaps(w.ns).Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = w.c.kube.CoreV1().ConfigMaps(w.ns).Update(ctx, o, metav1.UpdateOptions{})
		}
		return err
	case *fleet.HelmOp:
		cur, err := f.FleetV1alpha1().HelmOps(w.ns).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = f.FleetV1alpha1().HelmOps(w.ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		} else if err != nil {
			return err
		}
		o.ResourceVersion = cur.ResourceVersion
		_, err = f.FleetV1alpha1().HelmOps(w.ns).Update(ctx, o, metav1.UpdateOptions{})
		return err
	case *fleet.Cluster:
		cur, err := f.FleetV1alpha1().Clusters(w.ns).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = f.FleetV1alpha1().Clusters(w.ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		} else if err != nil {
			return err
		}
		o.ResourceVersion = cur.ResourceVersion
		_, err = f.FleetV1alpha1().Clusters(w.ns).Update(ctx, o, metav1.UpdateOptions{})
		return err
	case *fleet.Bundle:
		cur, err := f.FleetV1alpha1().Bundles(w.ns).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = f.FleetV1alpha1().Bundles(w.ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		} else if err != nil {
			return err
		}
		o.ResourceVersion = cur.ResourceVersion
		_, err = f.FleetV1alpha1().Bundles(w.ns).Update(ctx, o, metav1.UpdateOptions{})
		return err
	case *fleet.ClusterGroup:
		cur, err := f.FleetV1alpha1().ClusterGroups(w.ns).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = f.FleetV1alpha1().ClusterGroups(w.ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		} else if err != nil {
			return err
		}
		o.ResourceVersion = cur.ResourceVersion
		_, err = f.FleetV1alpha1().ClusterGroups(w.ns).Update(ctx, o, metav1.UpdateOptions{})
		return err
	}
	return fmt.Errorf("apply: unsupported %T", obj)
}

func fleetClient(t *testing.T) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rows returns the workspace's DownstreamCopy rows as sorted
// "cluster/kind/name@namespace=phase" strings, read through the aggregator.
func (w *workspace) rows(ctx context.Context, opts metav1.ListOptions) ([]string, error) {
	list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range list.Items {
		out = append(out, fmt.Sprintf("%s/%s/%s@%s=%s", r.Spec.Cluster, r.Spec.Source.Kind, r.Spec.Source.Name, r.Spec.Target.Namespace, r.Status.Phase))
	}
	sort.Strings(out)
	return out, nil
}

// messages lists every row's name, phase and message, for failures.
func (w *workspace) messages() string {
	list, err := w.c.courier.CourierV1alpha1().DownstreamCopies(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, r := range list.Items {
		fmt.Fprintf(&b, "  %s %s: %s\n", r.Name, r.Status.Phase, r.Status.Message)
	}
	return b.String()
}

// waitRows waits until the workspace's rows (as rows prints them) are want.
func (w *workspace) waitRows(opts metav1.ListOptions, want ...string) {
	w.t.Helper()
	sort.Strings(want)
	var got []string
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, lastErr = w.rows(ctx, opts)
		if lastErr != nil {
			return false, nil
		}
		return strings.Join(got, ",") == strings.Join(want, ","), nil
	})
	if err != nil {
		w.t.Fatalf("rows in %s:\n got  %q (last error: %v)\n want %q\nmessages:\n%s", w.ns, got, lastErr, want, w.messages())
	}
}

// kubectl runs the real kubectl as the upstream admin and fails the test on
// error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := env.Kubectl(context.Background(), env.Upstream, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// eventually retries check for up to 30 s and fails with its last message.
func eventually(t *testing.T, what string, check func() (bool, string)) {
	t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var ok bool
		ok, msg = check()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %s", what, msg)
	}
}

func helmOp(name string, opts fleet.BundleDeploymentOptions, targets ...fleet.BundleTarget) *fleet.HelmOp {
	return &fleet.HelmOp{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       fleet.HelmOpSpec{BundleDeploymentOptions: opts, Targets: targets},
	}
}

func resources(kindNames ...string) []fleet.DownstreamResource {
	var out []fleet.DownstreamResource
	for _, kn := range kindNames {
		kind, name, _ := strings.Cut(kn, "/")
		out = append(out, fleet.DownstreamResource{Kind: kind, Name: name})
	}
	return out
}

func selectAll(name string) *fleet.ClusterGroup {
	return &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}}}
}
