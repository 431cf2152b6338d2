package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	courierv1alpha1 "github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/test/fleetsim"
)

// Objects Courier does not own, sitting exactly where Courier would
// write: a second HelmOp, guardOpName, lists the first source for
// guardedClusters Clusters, each into a namespace of its own where an
// unowned Secret of that name already exists. Through every kill and
// restart of scenario 1 (whose rounds change that source each time),
// each of those rows must stay Conflict, each object must keep its
// content and resourceVersion, and Courier must send no write there.
// The other objects of createForeign sit beside the copies, at names
// Courier never writes: only these can catch an overwrite.
const (
	guardOpName     = "guard"
	guardedClusters = 10
)

func guardNS(i int) string { return fmt.Sprintf("chaos-guard-c%d", i) }

// occupied are the unowned objects at listed names, by "ns/name" on their
// downstream index.
type occupied = foreignObjects

// occupy creates the guard namespaces and their unowned Secrets on each
// Cluster's downstream, then the guard HelmOp, and waits until its rows
// are all Conflict (the positive control that the check below is armed).
func (f *fleetRun) occupy(t *testing.T) occupied {
	t.Helper()
	ctx := context.Background()
	k := min(guardedClusters, f.n)
	out := occupied{}
	var mu sync.Mutex
	name := sourceName(0)
	err := fleetsim.Parallel(k, setupWorkers, func(idx int) error {
		i := idx + 1
		d := f.downstreamOf(i)
		kube := f.down[d]
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: guardNS(i)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		s, err := kube.CoreV1().Secrets(guardNS(i)).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: guardNS(i), Name: name,
			Labels: map[string]string{"chaos-occupant": "true"}}, StringData: map[string]string{roundKey: "not Courier's"}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		out["Secret "+s.Namespace+"/"+s.Name] = foreignObject{d, "Secret", s.Namespace, s.Name, s.ResourceVersion, content(s.Labels, s.Annotations, s.Data)}
		return nil
	})
	if err != nil {
		t.Fatalf("occupying listed names: %v", err)
	}
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: guardOpName}}
	op.Spec.DownstreamResources = []fleet.DownstreamResource{{Kind: "Secret", Name: name}}
	for i := 1; i <= k; i++ {
		target := fleet.BundleTarget{ClusterName: clusterName(i)}
		target.TargetNamespace = guardNS(i)
		op.Spec.Targets = append(op.Spec.Targets, target)
	}
	if _, err := f.fc.FleetV1alpha1().HelmOps(workspace).Create(ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := f.waitGuardConflict(t, len(out)); n != len(out) {
		t.Fatalf("guard rows: %d of %d Conflict within %s\n%s", n, len(out), f.budget(), fleetsim.RowsSummary(f.fc, workspace))
	}
	return out
}

// waitGuardConflict waits until want guard rows are Conflict and returns
// how many are.
func (f *fleetRun) waitGuardConflict(t *testing.T, want int) int {
	t.Helper()
	n := 0
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, f.budget(), true, func(ctx context.Context) (bool, error) {
		n = 0
		list, err := f.fc.CourierV1alpha1().DownstreamCopies(workspace).List(ctx, metav1.ListOptions{LabelSelector: "courier.dev/helmop=" + guardOpName})
		if err != nil {
			return false, nil
		}
		for _, r := range list.Items {
			if r.Status.Phase == courierv1alpha1.CopyPhaseConflict && strings.Contains(r.Status.Message, "not managed by Courier") {
				n++
			}
		}
		return n == want, nil
	})
	return n
}

// checkOccupied reports scenario 1's overwrite check: the guard rows
// still Conflict, the occupants unchanged, and no write of Courier's into
// the guard namespaces in the whole run.
func (f *fleetRun) checkOccupied(t *testing.T, occ occupied) {
	t.Helper()
	conflicts := f.waitGuardConflict(t, len(occ))
	results.add(t, "1 kill", fmt.Sprintf("rows of unowned objects at listed names Conflict (of %d)", len(occ)), fmt.Sprint(conflicts), fmt.Sprint(len(occ)), conflicts == len(occ))
	changed := occ.changed(t, f)
	results.add(t, "1 kill", fmt.Sprintf("unowned objects at listed names changed (of %d, by content and resourceVersion)", len(occ)), fmt.Sprint(len(changed)), "0", len(changed) == 0)
	if len(changed) > 0 {
		t.Logf("changed occupants: %q", changed)
	}
	// A create of a copy whose name nothing of Courier's holds is sent
	// without a read first; the kube-apiserver refuses it (409) when an
	// unowned object holds the name. Refused attempts are shown; none may
	// be carried out.
	tried, carried := 0, 0
	for _, ds := range env.Downstreams {
		all, err := fleetsim.CourierWrites(ds.AuditLog)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range all {
			if strings.HasPrefix(w.Namespace, "chaos-guard-") || w.Resource == "namespaces" && strings.HasPrefix(w.Name, "chaos-guard-") {
				tried++
				if w.Accepted() {
					carried++
					t.Logf("write carried out into a guard namespace: %s", w)
				}
			}
		}
	}
	results.add(t, "1 kill", "Courier's writes into the namespaces of those objects, whole run (audit logs): carried out (tried)",
		fmt.Sprintf("%d (%d)", carried, tried), "0 carried out", carried == 0)
}
