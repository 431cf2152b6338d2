// Package sharding decides which Courier replica delivers to which Fleet
// Cluster (docs/design.md#scale-out), so that every replica delivers rather than one
// leader, and never two for one Cluster.
//
// Clusters hash into a fixed number of buckets (Bucket). Each replica
// renews a membership Lease, courier-member-<identity>; the live members
// are those whose Lease this replica has seen renewed within its duration,
// by this replica's own clock. Rendezvous hashing over the live members
// names each bucket's desired owner (DesiredOwner). A replica delivers for
// bucket n only while it holds the Lease courier-bucket-<n> and its own
// term runs (Owns). A bucket Lease names its holder and term and is
// written only when the bucket changes hands, never to renew it: the
// holder's liveness is its membership Lease, the one Lease it renews. A
// replica takes a bucket it is the desired owner of when its Lease is
// free: released, or naming a holder that is gone (holderGone: its
// membership Lease fenced, or unrenewed for its duration and then fenced
// by this replica, or missing). When it is no longer the desired owner it
// stops delivery first (OnChange) and then releases the Lease, so the new
// owner takes it at its next pass.
//
// Why never two writers: a holder counts its term as valid only until
// RenewDeadline after it sent its last successful membership renewal, by
// its clock; a successor takes a bucket from a holder that did not
// release it only after LeaseDuration (longer) has passed, by its own
// clock, since it observed that renewal, and after a write conditioned on
// the observed version (the fence) proved no renewal came since. Clocks
// need not agree, only run at about the same rate; docs/scale-out.md gives
// the whole argument.
//
// Cost upstream at rest: one membership renewal per replica every
// RenewPeriod (0.2 writes/s at the default 5 s), whatever the number of
// buckets; each hand-over writes the bucket Lease once. Reads are one
// watch per replica on each kind of Lease.
//
// The package is a leaf of Courier's own code: client-go and the API
// types only, not the engine, the view or the registry
// (pkg/importrules).
package sharding
