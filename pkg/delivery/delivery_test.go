package delivery

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// holders is a fixed bucket-holder lookup: Cluster name to holder.
type holders struct {
	self string
	by   map[string]string
}

var _ Holders = holders{}

func (h holders) HolderOf(_, name string) string { return h.by[name] }
func (h holders) Self() string                   { return h.self }

func cluster(name string, annotations map[string]string) *fleet.Cluster {
	return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, Annotations: annotations}}
}

func agentUser(v string) map[string]string { return map[string]string{courier.AnnotationAgentUser: v} }

func TestOf(t *testing.T) {
	tests := []struct {
		name       string
		cluster    *fleet.Cluster
		want       Way
		wantAgent  string
		wantReason string // a part of Reason
		wantPushed bool
		wantColumn string
	}{
		{name: "no annotation: pushed", cluster: cluster("c1", nil), want: Pushed, wantPushed: true, wantColumn: "pushed"},
		{name: "other annotations: pushed", cluster: cluster("c1", map[string]string{"courier.dev/export": "false"}), want: Pushed, wantPushed: true, wantColumn: "pushed"},
		{name: "an empty annotation names no agent: pushed", cluster: cluster("c1", agentUser("")), want: Pushed, wantPushed: true, wantColumn: "pushed"},
		{name: "a ServiceAccount: pulled", cluster: cluster("c1", agentUser("system:serviceaccount:cattle:agent-c1")),
			want: Agent, wantAgent: "system:serviceaccount:cattle:agent-c1", wantColumn: "agent"},
		{name: "a certificate's user: pulled", cluster: cluster("c1", agentUser("courier-agent:c1")), want: Agent, wantAgent: "courier-agent:c1", wantColumn: "agent"},
		{name: "an OIDC user with a space inside: pulled", cluster: cluster("c1", agentUser("https://idp#Edge Agent")), want: Agent, wantAgent: "https://idp#Edge Agent", wantColumn: "agent"},
		{name: "only white space: nobody", cluster: cluster("c1", agentUser("  ")), want: Nobody, wantReason: "white space", wantColumn: "<none>"},
		{name: "white space around: nobody", cluster: cluster("c1", agentUser(" agent-c1")), want: Nobody, wantReason: "white space", wantColumn: "<none>"},
		{name: "a trailing newline: nobody", cluster: cluster("c1", agentUser("agent-c1\n")), want: Nobody, wantReason: "white space", wantColumn: "<none>"},
		{name: "a control character: nobody", cluster: cluster("c1", agentUser("agent\x00c1")), want: Nobody, wantReason: "control character", wantColumn: "<none>"},
		{name: "not UTF-8: nobody", cluster: cluster("c1", agentUser("agent\xffc1")), want: Nobody, wantReason: "UTF-8", wantColumn: "<none>"},
		{name: "the anonymous user: nobody", cluster: cluster("c1", agentUser("system:anonymous")), want: Nobody, wantReason: "anonymous", wantColumn: "<none>"},
		{name: "a ServiceAccount without a name: nobody", cluster: cluster("c1", agentUser("system:serviceaccount:cattle")), want: Nobody, wantReason: "system:serviceaccount:<namespace>:<name>", wantColumn: "<none>"},
		{name: "a ServiceAccount with an empty namespace: nobody", cluster: cluster("c1", agentUser("system:serviceaccount::a")), want: Nobody, wantReason: "system:serviceaccount:<namespace>:<name>", wantColumn: "<none>"},
		{name: "a ServiceAccount name with a colon: nobody", cluster: cluster("c1", agentUser("system:serviceaccount:cattle:a:b")), want: Nobody, wantReason: "system:serviceaccount:<namespace>:<name>", wantColumn: "<none>"},
		{name: "no Cluster: nobody", cluster: nil, want: Nobody, wantReason: "not known", wantColumn: "<none>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Of(tt.cluster)
			if a.Way != tt.want || a.Agent != tt.wantAgent {
				t.Errorf("Of = way %s, agent %q; want way %s, agent %q", a.Way, a.Agent, tt.want, tt.wantAgent)
			}
			if (tt.wantReason == "") != (a.Reason == "") || !strings.Contains(a.Reason, tt.wantReason) {
				t.Errorf("Reason %q; want one containing %q", a.Reason, tt.wantReason)
			}
			if a.Way == Nobody && tt.cluster != nil && !strings.Contains(a.Reason, courier.AnnotationAgentUser) {
				t.Errorf("Reason %q does not name the annotation", a.Reason)
			}
			if a.Pulled() != (tt.want == Agent) || a.Pushed() != tt.wantPushed {
				t.Errorf("Pulled %v, Pushed %v; want %v, %v", a.Pulled(), a.Pushed(), tt.want == Agent, tt.wantPushed)
			}
			if a.String() != tt.wantColumn {
				t.Errorf("String = %q, want %q", a.String(), tt.wantColumn)
			}
		})
	}
}

func TestBy(t *testing.T) {
	h := holders{self: "courier-0", by: map[string]string{"mine": "courier-0", "theirs": "courier-1"}}
	tests := []struct {
		name       string
		cluster    *fleet.Cluster
		holders    Holders
		want       Answer
		wantPushed bool
		wantColumn string
	}{
		{name: "without sharding: the leader", cluster: cluster("mine", nil), want: Answer{Way: Leader}, wantPushed: true, wantColumn: "leader"},
		{name: "its bucket held here: this replica", cluster: cluster("mine", nil), holders: h,
			want: Answer{Way: ThisReplica, Replica: "courier-0"}, wantPushed: true, wantColumn: "courier-0"},
		{name: "its bucket held by another replica: that replica", cluster: cluster("theirs", agentUser("")), holders: h,
			want: Answer{Way: Replica, Replica: "courier-1"}, wantPushed: true, wantColumn: "courier-1"},
		{name: "its bucket held by nobody yet: nobody, still pushed", cluster: cluster("new", nil), holders: h,
			want: Answer{Way: Nobody, Reason: noHolder, unheld: true}, wantPushed: true, wantColumn: "<none>"},
		{name: "pulled: its agent, whoever holds its bucket", cluster: cluster("mine", agentUser("courier-agent:mine")), holders: h,
			want: Answer{Way: Agent, Agent: "courier-agent:mine"}, wantColumn: "agent"},
		{name: "pulled without sharding: its agent", cluster: cluster("mine", agentUser("courier-agent:mine")),
			want: Answer{Way: Agent, Agent: "courier-agent:mine"}, wantColumn: "agent"},
		{name: "a malformed annotation: nobody, whoever holds its bucket", cluster: cluster("mine", agentUser(" x")), holders: h,
			want: Of(cluster("mine", agentUser(" x"))), wantColumn: "<none>"},
		{name: "no Cluster: nobody", cluster: nil, holders: h, want: Of(nil), wantColumn: "<none>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := By(tt.cluster, tt.holders)
			if a != tt.want {
				t.Errorf("By = %#v, want %#v", a, tt.want)
			}
			if a.Pushed() != tt.wantPushed {
				t.Errorf("Pushed = %v, want %v", a.Pushed(), tt.wantPushed)
			}
			if a.String() != tt.wantColumn {
				t.Errorf("String = %q, want %q", a.String(), tt.wantColumn)
			}
		})
	}
}
