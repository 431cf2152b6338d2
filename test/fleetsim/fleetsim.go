// Package fleetsim simulates Fleet Clusters on a few real kube-apiservers
// for the suites that need many of them (test/bench, test/chaos): Clusters
// whose kubeconfig Secrets reach the downstream kube-apiservers in turn,
// each with its own destination namespace; sources changed all at once;
// arrivals of copies seen by watch; rows waited for; Courier's writes read
// from the downstream audit logs.
package fleetsim

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/test/localenv"
)

// Parallel runs f(0) ... f(n-1), workers at a time, and returns the first
// error (after all have finished).
func Parallel(n, workers int, f func(i int) error) error {
	work := make(chan int)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range work {
				errs[i] = f(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// CreateClusters creates n Fleet Clusters in namespace ns, named name(1)
// ... name(n), each with a kubeconfig Secret "<name>-kubeconfig" that
// reaches downstreams[(i-1) % len(downstreams)], workers at a time. It
// returns the kubeconfigs by index (0 for the first Cluster).
func CreateClusters(ctx context.Context, up kubernetes.Interface, fc versioned.Interface, ns string, n int, name func(int) string,
	downstreams []*localenv.Cluster, workers int) ([][]byte, error) {
	var perDownstream [][]byte
	for _, ds := range downstreams {
		kc, err := os.ReadFile(ds.Kubeconfig)
		if err != nil {
			return nil, err
		}
		perDownstream = append(perDownstream, kc)
	}
	kubeconfigs := make([][]byte, n)
	err := Parallel(n, workers, func(i int) error {
		cn := name(i + 1)
		kubeconfigs[i] = perDownstream[i%len(perDownstream)]
		if _, err := up.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cn + "-kubeconfig"},
			Data: map[string][]byte{"value": kubeconfigs[i]}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := fc.FleetV1alpha1().Clusters(ns).Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cn},
			Spec: fleet.ClusterSpec{KubeConfigSecret: cn + "-kubeconfig"}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating Clusters: %w", err)
	}
	return kubeconfigs, nil
}

// UpdateSources sets data key of each named Secret in ns to value, all at
// once, and returns when the updates started: the time a fan-out is
// measured from.
func UpdateSources(ctx context.Context, kube kubernetes.Interface, ns string, names []string, key, value string) (time.Time, error) {
	current := make([]*corev1.Secret, len(names))
	for j, name := range names {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return time.Time{}, err
		}
		current[j] = s
	}
	t0 := time.Now()
	err := Parallel(len(names), len(names), func(j int) error {
		s := current[j]
		for {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[key] = []byte(value)
			_, err := kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
			if !apierrors.IsConflict(err) {
				return err
			}
			if s, err = kube.CoreV1().Secrets(ns).Get(ctx, s.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
	})
	return t0, err
}

// WaitSynced waits until namespace ns shows want DownstreamCopy rows, all
// Synced, read through the aggregator as a user would. The error carries
// the rows by phase.
func WaitSynced(ctx context.Context, fc versioned.Interface, ns string, want int, timeout time.Duration) error {
	return WaitSyncedSelected(ctx, fc, ns, "", want, timeout)
}

// WaitSyncedSelected is WaitSynced over the rows a label selector picks.
func WaitSyncedSelected(ctx context.Context, fc versioned.Interface, ns, selector string, want int, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := fc.CourierV1alpha1().DownstreamCopies(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		synced := 0
		for _, r := range list.Items {
			if r.Status.Phase == courierv1alpha1.CopyPhaseSynced {
				synced++
			}
		}
		return len(list.Items) == want && synced == want, nil
	})
	if err != nil {
		return fmt.Errorf("rows in %s not all Synced (want %d):\n%s", ns, want, RowsSummary(fc, ns))
	}
	return nil
}

// RowsSummary counts the rows in ns by phase, with one message per phase,
// for failures.
func RowsSummary(fc versioned.Interface, ns string) string {
	list, err := fc.CourierV1alpha1().DownstreamCopies(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	count := map[courierv1alpha1.CopyPhase]int{}
	msg := map[courierv1alpha1.CopyPhase]string{}
	for _, r := range list.Items {
		count[r.Status.Phase]++
		msg[r.Status.Phase] = r.Status.Message
	}
	var b strings.Builder
	for p, c := range count {
		fmt.Fprintf(&b, "  %s: %d (e.g. %s)\n", p, c, msg[p])
	}
	return b.String()
}
