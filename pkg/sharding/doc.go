// Package sharding decides which Courier replica delivers to which Fleet
// Cluster (docs/design.md#scale-out), so that every replica delivers rather than one
// leader, and never two for one Cluster.
//
// Clusters hash into a fixed number of buckets (Bucket). Each replica
// renews a membership Lease, courier-member-<identity>; the live members
// are those whose Lease this replica has seen renewed within its duration,
// by this replica's own clock. Rendezvous hashing over the live members
// names each bucket's desired owner (DesiredOwner). A replica delivers for
// bucket n only while it holds the Lease courier-bucket-<n> (Owns): it
// acquires it when it is the desired owner and the Lease is free (released
// or expired as it observes it), renews every held bucket from one loop
// (several renewals in flight at once; one that lands after its deadline
// counts as a new gain), and when it is no longer the desired owner it
// stops delivery first (OnChange) and then releases the Lease, so the new
// owner takes it at its next pass instead of after expiry.
//
// Why never two writers: a holder counts its term as valid only until
// RenewDeadline after it sent its last successful renewal, by its clock; a
// successor takes an unreleased Lease only after LeaseDuration (longer)
// has passed, by its own clock, since it observed that renewal, which it
// cannot have observed before it was sent. Clocks need not agree, only run
// at about the same rate; docs/scale-out.md gives the whole argument.
//
// Cost upstream in steady state: one Lease update per member and per held
// bucket every RenewPeriod, at most (members + buckets) / RenewPeriod
// writes per second for the whole fleet: 3 replicas and 64 buckets at the
// default 5 s are (3 + 64) / 5 = 13.4 writes/s, each a Lease of a few
// hundred bytes; reads are one watch per replica on each kind of Lease.
// Renewals are checked every RetryPeriod, so each comes 5 to 7 s after the
// last and the real rate is somewhat lower.
//
// The package is a leaf of Courier's own code: client-go and the API
// types only, not the engine, the view or the registry
// (pkg/importrules). Wiring it into the engine is not done yet.
package sharding
