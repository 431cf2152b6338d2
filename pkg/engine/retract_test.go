package engine

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
)

// deniedRow is the row the view hands over for a source that may never be
// exported: Denied and labelled not delivered.
func deniedRow(src *corev1.Secret) *courier.DownstreamCopy {
	r := rowOf(src)
	r.Labels = map[string]string{courier.LabelDeliver: "false"}
	r.Status = courier.DownstreamCopyStatus{Phase: courier.CopyPhaseDenied, Message: "Secret fleet-default/old is never exported (rule kubeconfig-content)"}
	return r
}

// A copy written with keepResources is kept when nothing lists it any
// more, but removed, with a Warning Event and a note on its row, when its
// row is Denied: keepResources keeps copies, never leaks.
func TestSweepRetractsDeniedKeptCopy(t *testing.T) {
	for _, denied := range []bool{false, true} {
		t.Run(fmt.Sprintf("denied=%t", denied), func(t *testing.T) {
			db, old := srcSecret("db", "7"), srcSecret("old", "3")
			kept := secretCopy(old, targetNS, copyspec.Owner{UpstreamID: upstreamID, HelmOp: appOp, Cluster: "c1", Keep: true})
			down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")), kept)
			env := newEnv(t, down, db)
			rows := []*courier.DownstreamCopy{rowOf(db)}
			if denied {
				rows = append(rows, deniedRow(old))
			}
			if err := env.reconcile(rows...); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			_, exists := down.secret(targetNS, "old")
			if exists == denied {
				t.Errorf("the kept copy exists: %t, want %t", exists, !denied)
			}
			var wantEvents []string
			if denied {
				wantEvents = []string{"Warning ExportRetracted Secret apps/old, written with keepResources, was removed from cluster c1: " +
					"its source may never be exported"}
				st := env.mustStatus(deniedRow(old))
				want := copycontract.Status{Phase: courier.CopyPhaseDenied, Message: retractedNote("Secret", targetNS, "old", "c1")}
				if st.Phase != want.Phase || st.Message != want.Message {
					t.Errorf("the Denied row's record = %+v, want %+v", st, want)
				}
			}
			checkActions(t, "event", env.takeEvents(), wantEvents)
			var leftovers []string
			for _, l := range env.leftovers() {
				leftovers = append(leftovers, string(l.Phase)+" "+l.Name)
			}
			var wantLeft []string
			if !denied {
				wantLeft = []string{"Kept old"}
			}
			checkActions(t, "leftovers", leftovers, wantLeft)
		})
	}
}

// Fleet's own copy of a denied source is never touched; the row's record
// says Fleet exported it, naming the Cluster and the BundleDeployment,
// with one Warning Event, and says nothing more once Fleet's copy is gone.
func TestDeniedRowNotesFleetsCopy(t *testing.T) {
	db, old := srcSecret("db", "7"), srcSecret("old", "3")
	fleets := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: targetNS, Name: "old",
		Labels: map[string]string{copyspec.FleetCopyLabel: "bd-app"}}}
	down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")), fleets)
	down.foreignWatched = true
	down.foreignObjs = map[string]metav1.Object{targetNS + "/old": fleets}
	env := newEnv(t, down, db)

	if err := env.reconcile(rowOf(db), deniedRow(old)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	note := FleetExportNote("Secret", targetNS, "old", "c1", "bd-app")
	if st := env.mustStatus(deniedRow(old)); st.Phase != courier.CopyPhaseDenied || st.Message != note {
		t.Errorf("the Denied row's record = %+v, want Denied %q", st, note)
	}
	checkActions(t, "event", env.takeEvents(), []string{"Warning ExportedByFleet " + note})
	if _, ok := down.secret(targetNS, "old"); !ok {
		t.Errorf("Fleet's copy was removed")
	}
	for _, a := range down.kube.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("a write downstream: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}

	// Again: nothing new, no second Event.
	if err := env.reconcile(rowOf(db), deniedRow(old)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	checkActions(t, "event", env.takeEvents(), nil)

	// Fleet's copy gone: the record no longer says it is there.
	delete(down.foreignObjs, targetNS+"/old")
	if err := env.reconcile(rowOf(db), deniedRow(old)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if st := env.mustStatus(deniedRow(old)); st.Phase != courier.CopyPhaseDenied || st.Message != "" {
		t.Errorf("the Denied row's record after Fleet's copy went = %+v, want Denied without a note", st)
	}

	// The source allowed again: the row is delivered, and the Denied
	// record is forgotten at once, before any pass.
	env.setDesired(rowOf(db), rowOf(old))
	if st, ok := env.status(rowOf(old)); ok {
		t.Errorf("the row allowed again still has the record %+v", st)
	}
}
