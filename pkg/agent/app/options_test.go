package app

import (
	"strings"
	"testing"
	"time"
)

// --cluster is <namespace>/<name>, the upstream kubeconfig is required, and
// the Lease lives in the agent namespace unless told otherwise.
func TestOptions(t *testing.T) {
	o := NewOptions()
	fss := o.Flags()
	args := []string{"--cluster=fleet-default/edge2", "--upstream-kubeconfig=/up", "--agent-namespace=agents", "--report-interval=5s"}
	for _, fs := range fss.FlagSets {
		fs.ParseErrorsAllowlist.UnknownFlags = true
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
	}
	o.Complete()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.LeaderElection.ResourceNamespace != "agents" || o.LeaderElection.ResourceName != "courier-agent" || !o.LeaderElection.LeaderElect {
		t.Errorf("leader election %+v", o.LeaderElection)
	}
	if c, _ := o.cluster(); c.Namespace != "fleet-default" || c.Name != "edge2" || o.ReportInterval != 5*time.Second {
		t.Errorf("cluster %v interval %s", c, o.ReportInterval)
	}

	bad := NewOptions()
	bad.Cluster = "edge2"
	bad.ReportInterval = 0
	bad.Complete()
	err := bad.Validate()
	for _, want := range []string{"--cluster must be <namespace>/<name>", "--upstream-kubeconfig is required", "--report-interval"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
}
