package delivery

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

func TestAgentUser(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		wantUser    string
		wantPulled  bool
	}{
		{name: "no annotation: pushed"},
		{name: "an agent named: pulled", annotations: map[string]string{courier.AnnotationAgentUser: "system:serviceaccount:cattle:agent-c1"},
			wantUser: "system:serviceaccount:cattle:agent-c1", wantPulled: true},
		{name: "an empty annotation names no agent: pushed", annotations: map[string]string{courier.AnnotationAgentUser: ""}},
		{name: "other annotations: pushed", annotations: map[string]string{"courier.dev/export": "false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Annotations: tt.annotations}}
			user, pulled := AgentUser(c)
			if user != tt.wantUser || pulled != tt.wantPulled {
				t.Errorf("AgentUser = %q, %v; want %q, %v", user, pulled, tt.wantUser, tt.wantPulled)
			}
			if Pulled(c) != tt.wantPulled {
				t.Errorf("Pulled = %v, want %v", Pulled(c), tt.wantPulled)
			}
		})
	}
	if _, pulled := AgentUser(nil); pulled {
		t.Error("a nil Cluster is pulled")
	}
}
