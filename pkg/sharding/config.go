package sharding

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

// Names and labels of the Leases (docs/design.md#scale-out). They are part of the
// on-cluster protocol: replicas find each other and the buckets by them.
const (
	// MemberLeasePrefix + identity names a replica's membership Lease.
	MemberLeasePrefix = "courier-member-"
	// BucketLeasePrefix + bucket number names a bucket's Lease.
	BucketLeasePrefix = "courier-bucket-"
	// MemberLabel ("true") marks membership Leases; the member informer
	// selects on it, so other Leases in the namespace cost nothing.
	MemberLabel = "courier.dev/shard-member"
	// BucketLabel ("true") marks bucket Leases.
	BucketLabel = "courier.dev/shard-bucket"
)

// Defaults. A replica renews its membership Lease alone, one write per
// renew period whatever the number of buckets: 0.2 writes/s at 5 s.
const (
	DefaultBuckets       = 64
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRenewPeriod   = 5 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// MaxBuckets bounds the number of Leases a fleet keeps.
	MaxBuckets = 1024
)

// Config configures a Manager.
type Config struct {
	// Namespace holds every membership and bucket Lease (Courier's own).
	Namespace string
	// Identity names this replica (its Pod name): unique among the
	// replicas running at once, and a valid suffix for a Lease name.
	Identity string
	// Buckets is how many buckets Clusters hash into. Every replica must
	// use the same number. Default 64.
	Buckets int
	// LeaseDuration is how long others wait, on their own clock, after the
	// last membership renewal they observed before they take a bucket of
	// this replica's (or count it gone). Whole seconds, as a Lease stores it. Default 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long after sending its last successful renewal
	// this replica still counts a bucket as its own. It must be shorter
	// than LeaseDuration: the difference is the margin for in-flight
	// writes and for clocks running at different rates. Default 10s.
	RenewDeadline time.Duration
	// RenewPeriod is how often the membership Lease is renewed (bucket
	// Leases are not: they are written on hand-over only). Default 5s.
	RenewPeriod time.Duration
	// RetryPeriod is how often the loop looks at membership and buckets
	// (acquire, release) and retries a failed renewal. Default 2s.
	RetryPeriod time.Duration
	// OnChange, when set, is called from the Manager's loop with the
	// buckets gained and lost. For lost buckets it is called before their
	// Leases are released and must return only once nothing writes for
	// them any more: its return is the acknowledgement that makes the
	// release safe. It should not block for long, as renewals wait on it.
	OnChange func(gained, lost []int)
	// Clusters, when set, lists the Clusters delivered through buckets
	// (pushed ones; pulled Clusters' agents deliver), for the metrics of
	// Clusters delivered and Clusters without owner. It is called once per
	// loop pass and must be cheap (an informer's lister).
	Clusters func() []types.NamespacedName
	// Clock is the Manager's clock; nil means the real one. Tests pass a
	// fake.
	Clock clock.Clock
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RenewPeriod == 0 {
		c.RenewPeriod = DefaultRenewPeriod
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Validate reports what would make the Manager unsafe or unable to work,
// at flag parsing rather than after the process started (as
// pkg/leaderelect.Validate does for leader election). Zero durations and
// bucket counts are validated after defaulting.
func (c Config) Validate() []error {
	c = c.withDefaults()
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("the namespace of the shard Leases must not be empty"))
	}
	if c.Identity == "" {
		errs = append(errs, errors.New("the replica's identity must not be empty"))
	} else if msgs := validation.IsDNS1123Subdomain(MemberLeasePrefix + c.Identity); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("identity %q does not make a valid Lease name: %v", c.Identity, msgs))
	}
	if c.Buckets < 1 || c.Buckets > MaxBuckets {
		errs = append(errs, fmt.Errorf("buckets must be between 1 and %d, got %d", MaxBuckets, c.Buckets))
	}
	lease, deadline, renew, retry := c.LeaseDuration, c.RenewDeadline, c.RenewPeriod, c.RetryPeriod
	if lease < time.Second || lease%time.Second != 0 {
		errs = append(errs, fmt.Errorf("lease duration (%s) must be a whole number of seconds, at least 1s", lease))
	}
	if lease <= deadline {
		errs = append(errs, fmt.Errorf("lease duration (%s) must be greater than the renew deadline (%s)", lease, deadline))
	}
	if deadline <= renew+retry {
		errs = append(errs, fmt.Errorf("renew deadline (%s) must be greater than the renew period (%s) plus the retry period (%s), so that a failed renewal is retried before the bucket is dropped", deadline, renew, retry))
	}
	if renew <= 0 || retry <= 0 {
		errs = append(errs, fmt.Errorf("renew period (%s) and retry period (%s) must be positive", renew, retry))
	}
	return errs
}
