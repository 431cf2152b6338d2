package copyview

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/copycontract"
)

// Relay carries to the view controller what parts built before it report:
// the engine's status changes and the agents' report changes. Those parts
// need somewhere to send to when they are built, and the controller is
// built last, from them (it reads the engine and the reports); a Relay is
// made first, handed to them, and NewController binds it (Informers.Relay).
// Data flows one way, and no closure reaches a variable assigned later.
//
// Until it is bound a Relay drops what it is told, as the wiring did
// before it: nothing is lost, because the controller reads the engine's
// statuses and the reports afresh for every row it computes, and it
// computes every row once its informers have synced.
type Relay struct {
	c atomic.Pointer[Controller]
}

// StatusChanged passes the engine's changes on to the controller.
func (r *Relay) StatusChanged(changes []copycontract.StatusChange) {
	if c := r.c.Load(); c != nil {
		c.StatusChanged(changes)
	}
}

// ReportChanged passes a pulled Cluster's report change on to the
// controller.
func (r *Relay) ReportChanged(cluster types.NamespacedName) {
	if c := r.c.Load(); c != nil {
		c.ReportChanged(cluster)
	}
}

// LeftoversChanged passes on that an owner's leftover copies changed in
// a Cluster's status object.
func (r *Relay) LeftoversChanged(owner types.NamespacedName) {
	if c := r.c.Load(); c != nil {
		c.LeftoversChanged(owner)
	}
}

// bind makes c the controller the relay speaks to. A relay serves one
// controller: binding it twice is a wiring mistake.
func (r *Relay) bind(c *Controller) {
	if !r.c.CompareAndSwap(nil, c) {
		panic("copyview: a Relay bound to a second controller")
	}
}
