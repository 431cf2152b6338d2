package copyview

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

// Copies no row wants any more are shown as rows of their own, Kept or
// Deleting, named as the row that wanted them was; a wanted row of the same
// name wins.
func TestWithLeftovers(t *testing.T) {
	op := types.NamespacedName{Namespace: "fleet-default", Name: "app"}
	wanted := &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: op.Namespace, Name: RowName("app", "c1", "Secret", "db")},
		Status: rowstatus.New(courier.CopyPhaseSynced, "the copy matches its source")}
	leftovers := []copycontract.Leftover{
		{HelmOp: op, Cluster: "c1", Kind: "Secret", Name: "db", TargetNamespace: "old-apps", Phase: courier.CopyPhaseDeleting, Message: "left in the previous namespace"},
		{HelmOp: op, Cluster: "c1", Kind: "Secret", Name: "kept", TargetNamespace: "apps", Keep: true, SyncedResourceVersion: "7", Phase: courier.CopyPhaseKept, Message: "kept"},
		{HelmOp: op, Cluster: "c2", Kind: "ConfigMap", Name: "old", TargetNamespace: "apps", Phase: courier.CopyPhaseDeleting, Message: "the leader removes it"},
		{HelmOp: op, Cluster: "c2", Kind: "ConfigMap", Name: "old", TargetNamespace: "apps-2", Phase: courier.CopyPhaseDeleting, Message: "a second copy of the same row name"},
	}

	rows := withLeftovers([]*courier.DownstreamCopy{wanted}, leftovers)

	got := map[string]*courier.DownstreamCopy{}
	for _, r := range rows {
		if got[r.Name] != nil {
			t.Fatalf("two rows named %s", r.Name)
		}
		got[r.Name] = r
	}
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want the wanted one and two leftovers", len(rows))
	}
	if r := got[RowName("app", "c1", "Secret", "db")]; r.Status.Phase != courier.CopyPhaseSynced {
		t.Errorf("the wanted row was replaced by a leftover: %s %s", r.Status.Phase, r.Status.Message)
	}
	kept := got["app.c1.secret.kept"]
	if kept == nil {
		t.Fatalf("no Kept row; rows: %v", got)
	}
	if kept.Status.Phase != courier.CopyPhaseKept || kept.Status.SyncedResourceVersion != "7" || !kept.Spec.KeepResources ||
		kept.Spec.Target.Namespace != "apps" || kept.Spec.HelmOp != "app" || kept.Spec.Cluster != "c1" {
		t.Errorf("Kept row = %+v %+v", kept.Spec, kept.Status)
	}
	if c := kept.Status.Conditions; len(c) != 1 || c[0].Status != metav1.ConditionTrue {
		t.Errorf("a Kept copy is where it should be: Ready must be True, got %+v", c)
	}
	if kept.Labels[LabelHelmOp] != "app" || kept.Labels[LabelCluster] != "c1" || kept.Labels[LabelSourceKind] != "secret" {
		t.Errorf("Kept row labels = %v, want those of any row (for selectors)", kept.Labels)
	}
	if kept.UID != rowUID(op.Namespace, kept.Name) {
		t.Errorf("Kept row UID %q is not the stable one", kept.UID)
	}
	del := got["app.c2.configmap.old"]
	if del == nil || del.Status.Phase != courier.CopyPhaseDeleting || del.Status.Message != "the leader removes it" {
		t.Errorf("Deleting row = %+v", del)
	}
	if c := del.Status.Conditions; len(c) != 1 || c[0].Status != metav1.ConditionFalse {
		t.Errorf("a copy being deleted is not Ready, got %+v", c)
	}
}

// withLeftovers adds the leftover copies' rows to rows (see leftoverRows).
func withLeftovers(rows []*courier.DownstreamCopy, leftovers []copycontract.Leftover) []*courier.DownstreamCopy {
	wanted := make(map[string]bool, len(rows))
	for _, r := range rows {
		wanted[rowKey(r)] = true
	}
	return append(rows, leftoverRows(wanted, leftovers)...)
}
