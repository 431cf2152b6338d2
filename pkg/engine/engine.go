// Package engine is Courier's copy engine: it writes each listed Secret and
// ConfigMap into every downstream cluster a HelmOp targets, keeps the
// copies in step with their sources, repairs drift, removes copies nothing
// wants any more, and records what it saw for the downstreamcopies view.
//
// Work is queued per Cluster, and several workers run at once, so a slow,
// forbidden or unreachable cluster never delays another. The desired state
// comes from the downstreamcopies view, one HelmOp at a time (SetDesired,
// desired.go); the engine never reads HelmOps itself, so the view and the
// engine cannot disagree on targeting.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/downstream"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
)

var errUnsupported = errors.New("unsupported object")

// Downstream gives the engine a client per Cluster.
type Downstream interface {
	Get(ctx context.Context, cluster *fleet.Cluster) (*downstream.Client, error)
	Forget(clusterKey string)
}

// Config is what an Engine needs.
type Config struct {
	// UpstreamID identifies the upstream cluster in the copies' owner label
	// and courier.dev/upstream annotation, so two upstreams writing into one
	// downstream cluster never remove each other's copies.
	UpstreamID string
	// Upstream reads the sources (GET of listed Secrets and ConfigMaps only)
	// unless Sources is set.
	Upstream kubernetes.Interface
	// Sources reads the objects copies are made from. Default
	// UpstreamSources{Upstream}; a pulling agent reads payloads instead.
	Sources  SourceReader
	Clusters fleetlisters.ClusterLister
	HelmOps  fleetlisters.HelmOpLister
	// Bundles, when set, names the Bundles Events about a Bundle's copies
	// are recorded on (their UID, for kubectl describe); nil records them
	// on a reference without one.
	Bundles    fleetlisters.BundleLister
	Downstream Downstream
	// Recorder receives Events about the owners (HelmOps, Bundles); the
	// correlator aggregates repeats.
	Recorder record.EventRecorder
	// OnStatusChange is called (without locks held) when rows' recorded
	// statuses or HelmOps' leftover copies changed, naming them, so the
	// view updates just those rows.
	OnStatusChange func([]copycontract.StatusChange)
	// Publish, when set, is given after passes over a pushed Cluster this
	// replica delivers to the statuses recorded for all the Cluster's
	// rows, by row key, so that every replica can serve them (docs/design.md#scale-out,
	// publish.go), and the Cluster's leftover copies as its last
	// sweep found them (nil: not swept yet). It is called once the engine
	// is idle, or MaxPublishDelay after the first of those passes
	// (publishqueue.go). It must not block; the map and the slice are its
	// to keep.
	Publish func(clusterKey string, rows map[string]copycontract.Status, leftovers []copycontract.Leftover)
	// MaxPublishDelay bounds how long Publish waits for the engine to go
	// idle (DefaultMaxPublishDelay).
	MaxPublishDelay time.Duration
	// CopyEvents, when set, is the sink the Downstream's watches report
	// changes to copies to; New binds it to the engine (copyevents.go).
	CopyEvents *CopyEvents
	// Workers is how many clusters are reconciled at once (DefaultWorkers).
	Workers int
	// ResyncPeriod is how often each Cluster gets a whole pass, which also
	// sweeps copies nothing wants any more (default 5 minutes); the
	// Clusters' passes are spread over the period (resync.go).
	ResyncPeriod time.Duration
	// MinBackoff is the per-cluster retry backoff after a first failure;
	// it doubles with each failure after it (default 500 ms).
	MinBackoff time.Duration
	// MaxBackoff caps the per-cluster retry backoff (default 2 minutes).
	// A Cluster that does not answer is probed meanwhile, and its pass
	// starts as soon as it answers (reachability.go).
	MaxBackoff time.Duration
	// ProbeInterval is how often a Cluster that does not answer is asked
	// whether it answers again (DefaultProbeInterval).
	ProbeInterval time.Duration
	// Probe asks a Cluster's kube-apiserver once whether it answers; an
	// error that unreachable() accepts means it does not (default
	// ProbeVersion).
	Probe func(ctx context.Context, client *downstream.Client) error
	// AgentNamespace is where ServiceAccounts are looked up downstream.
	AgentNamespace string
	// RequireServiceAccount refuses to write with Courier's own identity.
	RequireServiceAccount bool
	// Follower starts the engine observing only: it plans every copy from
	// what it can read and records Synced, Pending, Conflict and the like,
	// but writes nothing, removes nothing and records no Events until
	// SetLeading(true). Replicas that are not the leader run this way so
	// their rows read the same as the leader's.
	Follower bool
	// Shards, when set, shares delivery among the replicas (docs/design.md#scale-out,
	// delivery.go): the engine passes over, watches and writes for a
	// pushed Cluster only while Shards.Owns its bucket, whatever
	// SetLeading said; Publish lets the other replicas show its rows.
	Shards *ShardConfig
	// DrainTimeout bounds how long Run waits, once its context is done, for
	// the groups of copies being written to finish (default 20 seconds).
	DrainTimeout time.Duration
	// SyncWait bounds how long a Cluster's pass waits for the informers of
	// a client just built (default 2 seconds; negative: not at all). A
	// synced informer answers for every copy of the Cluster without a
	// request and lets new copies be created without a read
	// (createUnread); a pass that starts before costs a GET per copy. An
	// unreachable cluster's informers never sync: its pass goes on after
	// SyncWait and fails on its first request.
	SyncWait time.Duration
	// GroupWriters is how many copies of one HelmOp and ServiceAccount in
	// one cluster are written at once (DefaultGroupWriters).
	GroupWriters int
}

// DefaultWorkers is how many clusters are reconciled at once unless
// --copy-workers says otherwise. A pass is mostly waiting on one cluster's
// kube-apiserver, so the bound is the number of requests in flight, not
// cores: at 1,000 Clusters, 4 workers made one source change a queue of
// 250 round trips per worker; 16 keep two cores busy on this machine
// without one slow cluster holding more than a sixteenth of them.
const DefaultWorkers = 16

// Engine reconciles downstream copies.
type Engine struct {
	cfg         Config
	queue       workqueue.TypedRateLimitingInterface[string]
	sources     *sourceCache
	current     *currentCopies
	copied      *eventBudget
	impersonate impersonators
	fallbacks   fallbackAnswers
	now         func() time.Time

	// leading is false while another replica holds the lease: the engine
	// then observes and never writes.
	leading atomic.Bool
	// draining is set once Run's context is done: no new cluster or group
	// is started, the ones in flight finish.
	draining atomic.Bool

	// The engine's state is split between owners, each with its own lock
	// that it never holds while calling out (not even to another owner),
	// so no two of these locks are ever held together. The one exception
	// is handover, which only serializes SetDesired and UpdateDesired: it
	// is taken first, and the owners' locks one at a time under it. (From
	// outside, CopyEvents.bind replays early changes under its own lock,
	// taken before any of the engine's: copyevents.go.)

	// desired is what the view asked for, and what is known of each
	// desired row and copy besides (desiredset.go).
	desired *desiredSet
	// statuses is the record the view reads: each row's last outcome, the
	// leftover copies and what changed since the last notify
	// (statusrecord.go).
	statuses *statusRecord
	// scopes is what each queued Cluster's next pass must cover (scope.go).
	scopes *passScopes
	// clients is what passes learnt of each Cluster's client: the one a
	// pass last ended with, its server, its legacy sweep (clientrecord.go).
	clients *clientRecord
	// echo tells the echoes of the engine's own writes from other changes
	// to copies (echo.go).
	echo *echoFilter
	// taken is, per Cluster, the rows whose copy's name the last live read
	// found held by an object Courier may not write (taken.go).
	taken *takenNames
	// handover serializes SetDesired and UpdateDesired (desired.go).
	handover sync.Mutex
	// gate counts the writes in flight per bucket, with sharding
	// (delivery.go). Its lock is taken alone, like the owners'.
	gate *deliveryGate
	// toPublish is the Clusters whose statuses wait for the engine to go
	// idle before they are published, and passes the passes running
	// (publishqueue.go).
	toPublish *publishQueue
	passes    passCounter
	// reach is which Clusters' last pass found them down, and which a
	// probe is asking whether they answer again (reachability.go).
	reach *reachability
	// writers run the writes of a group that are made at once (writes.go).
	writers *writerPool
}

// New returns an engine; Run starts it.
func New(cfg Config) *Engine {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 5 * time.Minute
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 2 * time.Minute
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.Probe == nil {
		cfg.Probe = ProbeVersion
	}
	if cfg.AgentNamespace == "" {
		cfg.AgentNamespace = fleet.SystemNamespace
	}
	if cfg.OnStatusChange == nil {
		cfg.OnStatusChange = func([]copycontract.StatusChange) {}
	}
	if cfg.Sources == nil {
		cfg.Sources = UpstreamSources{Client: cfg.Upstream}
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 20 * time.Second
	}
	if cfg.GroupWriters <= 0 {
		cfg.GroupWriters = DefaultGroupWriters
	}
	if cfg.SyncWait == 0 {
		cfg.SyncWait = 2 * time.Second
	}
	if cfg.MaxPublishDelay <= 0 {
		cfg.MaxPublishDelay = DefaultMaxPublishDelay
	}
	registerMetrics()
	e := &Engine{
		cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.MinBackoff, cfg.MaxBackoff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "courier_clusters"}),
		sources:  newSourceCache(cfg.Sources),
		current:  newCurrentCopies(),
		copied:   newEventBudget(),
		now:      time.Now,
		desired:  newDesiredSet(),
		statuses: newStatusRecord(),
		scopes:   newPassScopes(),
		writers:  newWriterPool(),
		clients:  newClientRecord(),
		taken:    newTakenNames(),
		gate:     newDeliveryGate(),

		toPublish: newPublishQueue(),
		reach:     newReachability(),
	}
	// Only the echo of a copy still wanted by its Cluster is nothing to do.
	e.echo = newEchoFilter(e.desired.wanted)
	e.leading.Store(!cfg.Follower)
	if cfg.CopyEvents != nil {
		cfg.CopyEvents.bind(e)
	}
	return e
}

// SetLeading switches the engine between writing (this replica holds the
// lease) and observing. On becoming the leader every Cluster is queued:
// copies that are already current cost no request, so a hand-over writes
// only what the previous leader left undone.
//
// With sharding (Config.Shards) the lease decides nothing for the engine.
func (e *Engine) SetLeading(leading bool) {
	if e.leading.Swap(leading) == leading || e.cfg.Shards != nil {
		return
	}
	if e.desired.isComplete() {
		e.queueAllClusters()
	}
}

// Leading reports whether the engine writes.
func (e *Engine) Leading() bool { return e.leading.Load() }

// ClusterChanged queues a cluster, for example when one of its copies
// changed downstream (drift).
func (e *Engine) ClusterChanged(clusterKey string) { e.queueWhole(clusterKey) }

// CopyChanged is told of every change to Courier's copies in a cluster
// (obj nil when one was deleted) and queues the cluster, except for the
// echo of a write the engine made itself (echo.go).
func (e *Engine) CopyChanged(clusterKey string, obj runtime.Object) {
	if e.echo.changed(clusterKey, obj) {
		e.queueWhole(clusterKey)
	}
}

// writing marks copy c of cluster as being written: CopyChanged holds its
// events until wrote is called with the outcome.
func (e *Engine) writing(cluster *fleet.Cluster, c desiredCopy) {
	e.echo.writing(cluster.Namespace+"/"+cluster.Name, c)
}

// wrote ends writing: rv is the resourceVersion the write gave the copy
// ("" when it failed); the cluster is queued when someone else changed
// the copy meanwhile (echoFilter.wrote).
func (e *Engine) wrote(cluster *fleet.Cluster, c desiredCopy, rv string) {
	clusterKey := cluster.Namespace + "/" + cluster.Name
	if e.echo.wrote(clusterKey, c, rv) {
		e.queueWhole(clusterKey)
	}
}

// expectEcho records the resourceVersion of a copy the engine just wrote.
func (e *Engine) expectEcho(cluster *fleet.Cluster, c desiredCopy, rv string) {
	e.writing(cluster, c)
	e.wrote(cluster, c, rv)
}

// forgetEchoes drops a cluster's expected echoes (the Cluster is gone).
func (e *Engine) forgetEchoes(clusterKey string) { e.echo.forget(clusterKey) }

// kindOfObject names the kind of a typed Secret or ConfigMap (informers'
// objects carry no TypeMeta).
func kindOfObject(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.ConfigMap:
		return "ConfigMap"
	}
	return ""
}

func (e *Engine) queueAllClusters() {
	clusters, err := e.cfg.Clusters.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, c := range clusters {
		e.queueWhole(c.Namespace + "/" + c.Name)
	}
}

// Run reconciles until ctx is done. Shutting down never leaves a group of
// copies half-written: once ctx is done no new cluster or group is
// started, the groups being written finish (their requests are not
// cancelled), and only after DrainTimeout are they abandoned.
func (e *Engine) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)
	work, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	var wg sync.WaitGroup
	for i := 0; i < e.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e.processNext(work) {
			}
		}()
	}
	go e.runResync(ctx)
	go e.runPublisher(ctx)
	logger.Info("Started copy engine", "workers", e.cfg.Workers, "leading", e.Leading())
	<-ctx.Done()
	e.draining.Store(true)
	e.queue.ShutDown()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
		logger.Info("Copy engine stopped; in-flight copies finished")
	case <-time.After(e.cfg.DrainTimeout):
		logger.Info("In-flight copies did not finish in time; abandoning them", "timeout", e.cfg.DrainTimeout)
		abandon()
		<-drained
	}
	e.publishAll()
}

func (e *Engine) processNext(ctx context.Context) bool {
	key, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(key)
	if e.draining.Load() {
		// The queue hands out what is left after ShutDown; a cluster not
		// started yet is left for the next process (or leader).
		return false
	}
	if !e.desired.isComplete() {
		// Not every HelmOp has been handed over yet: a pass now would
		// remove the copies of those still to come. DesiredComplete queues
		// every Cluster.
		e.queue.Forget(key)
		return true
	}
	if err := e.reconcileCluster(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Cluster not converged; retrying", "cluster", key, "err", err)
		// The retry looks at everything again, whatever this pass covered.
		e.scopes.oweWhole(key)
		e.queue.AddRateLimited(key)
		if probeWorthy(err) {
			e.probeUntilBack(ctx, key) // it may answer long before the backoff ends
		}
		return true
	}
	e.queue.Forget(key)
	return true
}

// helmOpRef is the object Events about a copy are recorded on: its owner,
// a HelmOp or a Bundle (copycontract.OwnerKey).
func (e *Engine) helmOpRef(nn types.NamespacedName) *corev1.ObjectReference {
	if o := copycontract.OwnerOf(nn); o.Kind == courier.OwnerKindBundle {
		if e.cfg.Bundles != nil {
			if b, err := e.cfg.Bundles.Bundles(nn.Namespace).Get(o.Name); err == nil {
				return fleet.ObjectReference("Bundle", b.Namespace, b.Name, b.UID, b.ResourceVersion)
			}
		}
		return fleet.ObjectReference("Bundle", nn.Namespace, o.Name, "", "")
	}
	if e.cfg.HelmOps != nil {
		if op, err := e.cfg.HelmOps.HelmOps(nn.Namespace).Get(nn.Name); err == nil {
			return fleet.HelmOpReference(op.Namespace, op.Name, op.UID, op.ResourceVersion)
		}
	}
	return fleet.HelmOpReference(nn.Namespace, nn.Name, "", "")
}

func nowTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

func describe(kind, ns, name string) string { return fmt.Sprintf("%s %s/%s", kind, ns, name) }
