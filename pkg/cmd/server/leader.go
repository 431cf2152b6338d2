package server

import (
	"context"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"

	// Exposes leader_election_master_status{name="courier"} on /metrics, so
	// operators (and the tests) can see which replica leads.
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
)

// defaultLeaderElection is the Kubernetes components' defaults with
// Courier's Lease: courier in courier-system (docs/design.md#command-line).
func defaultLeaderElection() componentbaseconfig.LeaderElectionConfiguration {
	c := componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:       true,
		ResourceLock:      resourcelock.LeasesResourceLock,
		ResourceName:      "courier",
		ResourceNamespace: "courier-system",
	}
	c.LeaseDuration.Duration = 15 * time.Second
	c.RenewDeadline.Duration = 10 * time.Second
	c.RetryPeriod.Duration = 2 * time.Second
	return c
}

// runControllers runs what writes -- the copy engine -- until ctx is done
// and returns once it has stopped. With leader election every replica runs
// the engine, observing, and only the one holding the Lease writes; with
// sharding (the default) each replica writes for the Clusters of the
// buckets it holds, and the Lease keeps only the field copies and the
// view's Warning Events. On shutdown the order matters: the engine first
// finishes the groups of copies it is writing, only then are the buckets
// and the Lease released (so no successor writes alongside it), and the
// caller stops serving last.
func (o *Options) runControllers(ctx context.Context, kube kubernetes.Interface, v *views) {
	logger := klog.FromContext(ctx)
	engineDone := make(chan struct{})
	go func() {
		defer close(engineDone)
		v.engine.Run(klog.NewContext(ctx, logger.WithName("engine")))
	}()
	if v.shards != nil {
		// The Manager outlives the engine's drain: its buckets are
		// released only once the engine wrote its last copy.
		shardCtx, leave := context.WithCancel(context.WithoutCancel(ctx))
		shardsDone := make(chan struct{})
		go func() { defer close(shardsDone); v.runShards(shardCtx) }()
		defer func() { <-engineDone; leave(); <-shardsDone }()
	}
	if !o.LeaderElection.LeaderElect {
		<-engineDone
		return
	}
	leCtx, release := context.WithCancel(context.WithoutCancel(ctx))
	defer release()
	campaignDone := make(chan struct{})
	go func() {
		defer close(campaignDone)
		o.campaign(klog.NewContext(leCtx, logger.WithName("leader-election")), kube, v)
	}()
	<-engineDone
	release()
	<-campaignDone
}

// campaign takes part in leader election until ctx is done, switching the
// writers on while this replica holds the Lease. Losing the Lease (the
// upstream unreachable for longer than the renew deadline, say) makes the
// replica a follower again and it campaigns anew; it keeps serving the API
// all along.
func (o *Options) campaign(ctx context.Context, kube kubernetes.Interface, v *views) {
	logger := klog.FromContext(ctx)
	le := o.LeaderElection
	host, _ := os.Hostname()
	id := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: v.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "courier"})})
	if err != nil {
		// Validate checked the lock type; nothing else can fail here.
		logger.Error(err, "Cannot take part in leader election; this replica never writes")
		return
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            le.ResourceName,
			LeaseDuration:   le.LeaseDuration.Duration,
			RenewDeadline:   le.RenewDeadline.Duration,
			RetryPeriod:     le.RetryPeriod.Duration,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					logger.Info("Acquired the Lease; this replica writes copies", "lease", le.ResourceNamespace+"/"+le.ResourceName, "identity", id)
					v.setLeading(true)
				},
				OnStoppedLeading: func() {
					v.setLeading(false)
					logger.Info("No longer holds the Lease; this replica only observes", "lease", le.ResourceNamespace+"/"+le.ResourceName)
				},
				OnNewLeader: func(leader string) {
					if leader != id {
						logger.Info("Another replica leads", "leader", leader)
					}
				},
			},
		})
		if err != nil {
			logger.Error(err, "Cannot take part in leader election; this replica never writes")
			return
		}
		elector.Run(ctx)
	}
}
