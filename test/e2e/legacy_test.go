package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
)

// TestLegacyClusterAnnotationIsCurrent: copies written before Courier
// stopped writing the courier.dev/cluster annotation carry it. Such a copy
// is current, so an upgrade rewrites nothing; the annotation goes at the
// copy's next write. The pass that must have seen the annotated copy is
// proven by a second copy deleted after the annotation: its repair comes
// from a later pass over the same Cluster's watch.
func TestLegacyClusterAnnotationIsCurrent(t *testing.T) {
	w := newWorkspace(t, "ws-legacy", nil, nil)
	w.apply(selectAll("default"))
	dest := "legacy-dest"
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "1"}})
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, StringData: map[string]string{"k": "1"}})
	w.apply(helmOp("app", fleet.BundleDeploymentOptions{TargetNamespace: dest, DownstreamResources: resources("Secret/s", "Secret/probe")}))
	waitSecret(t, 0, dest, "s", 10*time.Second, "copied", secretData("k", "1"))
	waitSecret(t, 0, dest, "probe", 10*time.Second, "copied", secretData("k", "1"))
	w.waitRows(metav1.ListOptions{}, "c1/Secret/probe@"+dest+"=Synced", "c1/Secret/s@"+dest+"=Synced",
		"c2/Secret/probe@"+dest+"=Synced", "c2/Secret/s@"+dest+"=Synced")

	ctx := context.Background()
	down := downstream(t, 0)
	patch := []byte(`{"metadata":{"annotations":{"` + copyspec.LegacyAnnotationCluster + `":"c1"}}}`)
	if _, err := down.CoreV1().Secrets(dest).Patch(ctx, "s", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	before := writesTo(t, 0, dest)
	if err := down.CoreV1().Secrets(dest).Delete(ctx, "probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, 0, dest, "probe", 10*time.Second, "repaired (the positive control)", secretData("k", "1"))
	after := writesTo(t, 0, dest)[len(before):]
	if !slices.Contains(after, "create secrets "+dest+"/probe") {
		t.Fatalf("the audit log shows no repair of the probe: %q", after)
	}
	if slices.Contains(after, "update secrets "+dest+"/s") {
		t.Errorf("a copy differing only by the legacy annotation was rewritten: %q", after)
	}

	// The next write of the copy drops the annotation.
	w.apply(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "2"}})
	waitSecret(t, 0, dest, "s", 10*time.Second, "changed, without the legacy annotation", func(s *corev1.Secret) bool {
		if !secretData("k", "2")(s) {
			return false
		}
		_, legacy := s.Annotations[copyspec.LegacyAnnotationCluster]
		return !legacy
	})
}
