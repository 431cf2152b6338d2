package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/delivery"
	"github.com/courier-dev/courier/pkg/engine"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/internal/kubeproto"
	"github.com/courier-dev/courier/pkg/sharding"
)

// ShardOptions are the flags of sharded delivery (docs/design.md#scale-out,
// docs/scale-out.md): every replica delivers to the pushed Clusters of
// the buckets whose Lease it holds. Buckets 0 turns it off: the leader
// delivers to every Cluster, as before.
type ShardOptions struct {
	Identity      string
	Buckets       int
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RenewPeriod   time.Duration
	RetryPeriod   time.Duration
}

// defaultShardOptions is sharding on with pkg/sharding's defaults, and
// the replica named by its Pod (POD_NAME, set from the downward API in
// the Deployment) or else the host.
func defaultShardOptions() ShardOptions {
	id := os.Getenv("POD_NAME")
	if id == "" {
		host, _ := os.Hostname()
		id = strings.ToLower(host) // a Lease name is lower case
	}
	return ShardOptions{
		Identity:      id,
		Buckets:       sharding.DefaultBuckets,
		LeaseDuration: sharding.DefaultLeaseDuration,
		RenewDeadline: sharding.DefaultRenewDeadline,
		RenewPeriod:   sharding.DefaultRenewPeriod,
		RetryPeriod:   sharding.DefaultRetryPeriod,
	}
}

func (s *ShardOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.Identity, "shard-identity", s.Identity,
		"This replica's name in sharded delivery: its membership Lease courier-member-<identity> and its user agent downstream. Unique among the replicas. Default: $POD_NAME, else the host name.")
	fs.IntVar(&s.Buckets, "shard-buckets", s.Buckets,
		"How many buckets pushed Clusters hash into; each replica delivers to the Clusters of the buckets whose Lease it holds. The same on every replica. 0: the leader delivers to every Cluster.")
	fs.DurationVar(&s.LeaseDuration, "shard-lease-duration", s.LeaseDuration,
		"How long the others wait, after the last renewal they saw, before taking a replica's buckets. Whole seconds.")
	fs.DurationVar(&s.RenewDeadline, "shard-renew-deadline", s.RenewDeadline,
		"How long after its last successful renewal a replica still writes for a bucket. Less than --shard-lease-duration; each downstream write is bounded by half the difference.")
	fs.DurationVar(&s.RenewPeriod, "shard-renew-period", s.RenewPeriod,
		"How often a replica renews its membership Lease (bucket Leases are written on hand-over only).")
	fs.DurationVar(&s.RetryPeriod, "shard-retry-period", s.RetryPeriod,
		"How often a replica looks at membership and buckets, and retries a failed renewal.")
}

// enabled reports whether delivery is sharded.
func (s ShardOptions) enabled() bool { return s.Buckets != 0 }

// config is the Manager's configuration, with its Leases in namespace.
func (s ShardOptions) config(namespace string) sharding.Config {
	return sharding.Config{
		Namespace: namespace, Identity: s.Identity, Buckets: s.Buckets,
		LeaseDuration: s.LeaseDuration, RenewDeadline: s.RenewDeadline,
		RenewPeriod: s.RenewPeriod, RetryPeriod: s.RetryPeriod,
	}
}

// validate reports what would make the Manager refuse to start
// (sharding.Config.Validate), at flag parsing.
func (s ShardOptions) validate(namespace string) []error {
	if !s.enabled() {
		return nil
	}
	if s.Buckets < 0 {
		return []error{fmt.Errorf("--shard-buckets must be 0 (off) or between 1 and %d, got %d", sharding.MaxBuckets, s.Buckets)}
	}
	var errs []error
	for _, err := range s.config(namespace).Validate() {
		errs = append(errs, fmt.Errorf("--shard-*: %w", err))
	}
	return errs
}

// writeTimeout bounds each downstream write: half of lease − renew
// deadline, so that a write started just before a replica's term ends
// lands or is abandoned with half the margin left for clocks running at
// different rates (docs/scale-out.md, "Why never two writers").
func (s ShardOptions) writeTimeout() time.Duration {
	return (s.LeaseDuration - s.RenewDeadline) / 2
}

// userAgent is what downstream audit logs show of this replica's
// requests: courier/<identity> with sharding, so that they tell the
// replicas apart.
func (s ShardOptions) userAgent() string {
	if !s.enabled() {
		return "courier"
	}
	return "courier/" + s.Identity
}

// newShards makes the Manager, with a client of its own whose rate limit
// does not queue renewals (docs/scale-out.md, "Cost upstream"), and the
// engine's view of it. It returns nil, nil with sharding off.
func (o *Options) newShards(config *rest.Config, clusters fleetlisters.ClusterLister, onChange func(gained, lost []int)) (*sharding.Manager, *engine.ShardConfig, error) {
	s := o.Shards
	if !s.enabled() {
		return nil, nil, nil
	}
	rc := kubeproto.Config(rest.CopyConfig(config))
	rc.QPS, rc.Burst, rc.RateLimiter = 100, 200, nil
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	cfg := s.config(o.LeaderElection.ResourceNamespace)
	cfg.Clusters = func() []types.NamespacedName { return pushedClusters(clusters) }
	cfg.OnChange = onChange
	m, err := sharding.New(kube, cfg)
	if err != nil {
		return nil, nil, err
	}
	return m, &engine.ShardConfig{Shards: m, Buckets: s.Buckets, WriteTimeout: s.writeTimeout()}, nil
}

// pushedClusters lists the Clusters Courier delivers to itself: those
// delivery.Of says the replicas push.
func pushedClusters(lister fleetlisters.ClusterLister) []types.NamespacedName {
	all, err := lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make([]types.NamespacedName, 0, len(all))
	for _, c := range all {
		if delivery.Of(c).Pushed() {
			out = append(out, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
		}
	}
	return out
}

// runShards takes part in sharded delivery until ctx is done; on return
// the Manager has stopped delivery for, and released, every bucket.
func (v *views) runShards(ctx context.Context) {
	if err := v.shards.Run(klog.NewContext(ctx, klog.FromContext(ctx).WithName("sharding"))); err != nil {
		klog.FromContext(ctx).Error(err, "Sharded delivery stopped; this replica delivers to no Cluster")
	}
}

// deliveredBy is the DELIVERED-BY cell of a row of Cluster
// namespace/name: delivery.By's answer (docs/design.md#pull-delivery):
// "agent" for a pulled Cluster, else the replica holding its bucket as
// this replica sees it ("<none>" while nobody does, or when nobody
// delivers the Cluster at all), or "leader" without sharding. It is
// computed when a Table is rendered, from the Cluster informer and the
// Manager's view of the bucket Leases: the holder changes without any row
// changing, and storing it in rows would make every hand-over rewrite (and
// send to every watcher) the rows of a whole bucket. It decides nothing.
func (v *views) deliveredBy(namespace, name string) string {
	c, err := v.fleetInformers.Fleet().V1alpha1().Clusters().Lister().Clusters(namespace).Get(name)
	if err != nil {
		c = nil // unknown: nobody delivers
	}
	return delivery.By(c, v.holders()).String()
}

// holders is who holds the buckets for delivery.By: nil without sharding.
func (v *views) holders() delivery.Holders {
	if v.shards == nil {
		return nil
	}
	return shardHolders{v.shards}
}

// shardHolders is delivery.Holders over the Manager's view of the bucket
// Leases, which pkg/sharding keeps.
type shardHolders struct{ m *sharding.Manager }

var _ delivery.Holders = shardHolders{}

// HolderOf implements delivery.Holders.
func (h shardHolders) HolderOf(namespace, name string) string {
	return h.m.Holder(sharding.Bucket(namespace, name, h.m.Buckets()))
}

// Self implements delivery.Holders.
func (h shardHolders) Self() string { return h.m.Identity() }
