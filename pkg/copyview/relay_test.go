package copyview

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/copycontract"
)

// An unbound Relay drops what it is told (the controller reads statuses
// afresh when it computes rows); a bound one passes it on; a Relay serves
// one controller.
func TestRelay(t *testing.T) {
	r := &Relay{}
	op := types.NamespacedName{Namespace: "fleet-default", Name: "op"}
	r.StatusChanged([]copycontract.StatusChange{{HelmOp: op}})
	r.ReportChanged(types.NamespacedName{Namespace: "fleet-default", Name: "c1"})

	c := newController(Inputs{}, nil, nil, nil)
	r.bind(c)
	if c.queue.Len() != 0 {
		t.Fatalf("changes told before binding reached the controller: %d queued", c.queue.Len())
	}
	r.StatusChanged([]copycontract.StatusChange{{HelmOp: op}})
	if c.queue.Len() != 1 {
		t.Errorf("a status change after binding queued %d HelmOps, want 1", c.queue.Len())
	}
	defer func() {
		if recover() == nil {
			t.Errorf("binding a second controller did not panic")
		}
	}()
	r.bind(newController(Inputs{}, nil, nil, nil))
}
