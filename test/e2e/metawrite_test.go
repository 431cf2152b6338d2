package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	courierdownstream "github.com/courier-dev/courier/pkg/downstream"
)

// Courier's writes read back only the written object's metadata: a real
// kube-apiserver answers a create and an update asked that way with
// PartialObjectMetadata (not the Secret with its data again), and a
// refused update with its own error.
func TestWritesReadBackMetadataOnly(t *testing.T) {
	ctx := context.Background()
	cfg := env.Downstreams[0].Config
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := "metawrite-e2e"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	cs, err := courierdownstream.NewClientset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mw := cs.(courierdownstream.MetadataWriter)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Data: map[string][]byte{"password": []byte("one")}}

	created, err := mw.CreateMetadata(ctx, secret, metav1.CreateOptions{FieldManager: "courier"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, ok := created.(*metav1.PartialObjectMetadata); !ok {
		t.Errorf("the create was answered with a %T, want PartialObjectMetadata", created)
	}
	secret.ResourceVersion = created.GetResourceVersion()
	secret.Data["password"] = []byte("two")
	updated, err := mw.UpdateMetadata(ctx, secret, metav1.UpdateOptions{FieldManager: "courier"})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, ok := updated.(*metav1.PartialObjectMetadata); !ok {
		t.Errorf("the update was answered with a %T, want PartialObjectMetadata", updated)
	}
	// The resourceVersion returned is the stored object's.
	stored, err := admin.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.ResourceVersion != updated.GetResourceVersion() || string(stored.Data["password"]) != "two" {
		t.Errorf("stored at %s with the update's data %t; the update answered %s",
			stored.ResourceVersion, string(stored.Data["password"]) == "two", updated.GetResourceVersion())
	}
	// A stale resourceVersion is refused with the server's Conflict.
	secret.ResourceVersion = created.GetResourceVersion()
	if _, err := mw.UpdateMetadata(ctx, secret, metav1.UpdateOptions{FieldManager: "courier"}); !apierrors.IsConflict(err) {
		t.Errorf("update from a stale resourceVersion: %v, want a Conflict", err)
	}
}
