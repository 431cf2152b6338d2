package rows

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/engine"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned/fake"
)

// TestDenied: only a Denied, undelivered row of this Cluster, for the
// copy's namespace, makes the engine remove a copy kept with
// keepResources.
func TestDenied(t *testing.T) {
	denied := row("app", "edge2", "Secret", "kubeconfig", "6", v1alpha1.CopyPhaseDenied)
	denied.Status.Message = "Secret fleet-default/kubeconfig is never exported (rule kubeconfig-content)"
	deniedDelivered := row("app", "edge2", "Secret", "odd", "6", v1alpha1.CopyPhaseDenied)
	deniedDelivered.Labels["courier.dev/deliver"] = "true"
	client := fake.NewSimpleClientset(denied, deniedDelivered,
		row("app", "edge2", "Secret", "old", "5", v1alpha1.CopyPhaseKept),
		row("app", "edge1", "Secret", "other", "6", v1alpha1.CopyPhaseDenied))
	c, err := New(client, ns, "edge2", "agents")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("rows did not sync")
	}
	app := types.NamespacedName{Namespace: ns, Name: "app"}
	for _, tc := range []struct {
		name string
		copy engine.DeniedCopy
		want bool
	}{
		{"denied", engine.DeniedCopy{Owner: app, Cluster: "edge2", Kind: "Secret", TargetNamespace: "apps", Name: "kubeconfig"}, true},
		{"another target namespace", engine.DeniedCopy{Owner: app, Cluster: "edge2", Kind: "Secret", TargetNamespace: "old-apps", Name: "kubeconfig"}, false},
		{"labelled delivered", engine.DeniedCopy{Owner: app, Cluster: "edge2", Kind: "Secret", TargetNamespace: "apps", Name: "odd"}, false},
		{"kept", engine.DeniedCopy{Owner: app, Cluster: "edge2", Kind: "Secret", TargetNamespace: "apps", Name: "old"}, false},
		{"another Cluster's", engine.DeniedCopy{Owner: app, Cluster: "edge1", Kind: "Secret", TargetNamespace: "apps", Name: "other"}, false},
		{"no row", engine.DeniedCopy{Owner: app, Cluster: "edge2", Kind: "Secret", TargetNamespace: "apps", Name: "none"}, false},
	} {
		msg, got := c.Denied(tc.copy)
		if got != tc.want || (got && msg != denied.Status.Message) {
			t.Errorf("%s: Denied = %q, %v; want %v", tc.name, msg, got, tc.want)
		}
	}
}
