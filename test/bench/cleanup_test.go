package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/fleetsim"
)

// cleanupScale removes what testScale made, so the next N starts from a
// quiet system: the HelmOp first (Courier must remove its N x 10 copies:
// checked), every destination namespace of this N (the rounds' and the
// new-HelmOp samples', Courier's and the pools'), then the upstream
// namespaces with the Clusters (Courier drops their clients).
func cleanupScale(t *testing.T, up kubernetes.Interface, fc versioned.Interface, l layout) {
	ctx := context.Background()
	if err := fc.FleetV1alpha1().HelmOps(l.workspace()).Delete(ctx, helmOpName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the HelmOp: %v", err)
	}
	for _, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Error(err)
			return
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, l.budget(), true, func(ctx context.Context) (bool, error) {
			list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + sideCourier})
			return err == nil && len(list.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("Courier's copies in %s not removed after the HelmOp was deleted", ds.Name)
		}
	}
	// Every destination namespace goes too (kube-controller-manager empties
	// them), waited for so that the next N starts on quiet kube-apiservers.
	clients := map[int]kubernetes.Interface{}
	for d, ds := range env.Downstreams {
		kube, err := kubernetes.NewForConfig(ds.Config)
		if err != nil {
			t.Error(err)
			return
		}
		clients[d] = kube
	}
	prefix := fmt.Sprintf("bench-%d-", l.n)
	for _, kube := range clients {
		list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing destination namespaces: %v", err)
			continue
		}
		var names []string
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, prefix) {
				names = append(names, ns.Name)
			}
		}
		err = fleetsim.Parallel(len(names), setupWorkers, func(i int) error {
			if err := kube.CoreV1().Namespaces().Delete(ctx, names[i], metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		})
		if err != nil {
			t.Errorf("deleting destination namespaces: %v", err)
		}
	}
	for _, kube := range clients {
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, l.budget(), true, func(ctx context.Context) (bool, error) {
			list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, ns := range list.Items {
				if strings.HasPrefix(ns.Name, prefix) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Errorf("destination namespaces %s* not all gone within %s", prefix, l.budget())
		}
	}
	nss := []string{l.workspace(), l.poolSources(), l.listNS()}
	for _, ns := range nss {
		if err := up.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	}
	for _, ns := range nss {
		waitNamespaceGone(t, up, ns)
	}
	waitIdle(t, courier.Pid(), 60*time.Second)
}
