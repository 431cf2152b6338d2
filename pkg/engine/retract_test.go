package engine

import (
	"fmt"
	"testing"

	"github.com/courier-dev/courier/pkg/copyspec"
)

// A copy written with keepResources is kept when nothing lists it any
// more, but removed, with a Warning Event naming the rule, when its row is
// Denied: keepResources keeps copies, never leaks.
func TestSweepRetractsDeniedKeptCopy(t *testing.T) {
	for _, denied := range []bool{false, true} {
		t.Run(fmt.Sprintf("denied=%t", denied), func(t *testing.T) {
			db, old := srcSecret("db", "7"), srcSecret("old", "3")
			kept := secretCopy(old, targetNS, copyspec.Owner{UpstreamID: upstreamID, HelmOp: appOp, Cluster: "c1", Keep: true})
			down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")), kept)
			env := newEnv(t, down, db)
			var asked []DeniedCopy
			env.e.cfg.Denied = func(c DeniedCopy) (string, bool) {
				asked = append(asked, c)
				return "Secret fleet-default/old is never exported (rule kubeconfig-content)", denied && c.Name == "old"
			}
			if err := env.reconcile(rowOf(db)); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			_, exists := down.secret(targetNS, "old")
			if exists == denied {
				t.Errorf("the kept copy exists: %t, want %t", exists, !denied)
			}
			want := DeniedCopy{Owner: appOp, Cluster: "c1", Kind: "Secret", TargetNamespace: targetNS, Name: "old"}
			if len(asked) != 1 || asked[0] != want {
				t.Errorf("asked %+v, want %+v", asked, want)
			}
			var wantEvents []string
			if denied {
				wantEvents = []string{"Warning ExportRetracted Secret old removed from apps in cluster c1 although written with keepResources: " +
					"Secret fleet-default/old is never exported (rule kubeconfig-content)"}
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
