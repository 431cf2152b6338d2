package copyview

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/memstore"
)

// workers is how many HelmOps are synced at once.
const workers = 2

// Informers are the informers the rows are computed from; Inputs must be
// listers over the same caches.
type Informers struct {
	HelmOps cache.SharedIndexInformer
	// Bundles is nil when the cluster serves no Bundles (Inputs.Bundles
	// is then nil too).
	Bundles       cache.SharedIndexInformer
	Clusters      cache.SharedIndexInformer
	ClusterGroups cache.SharedIndexInformer
	// Secrets and ConfigMaps are metadata-only informers
	// (*metav1.PartialObjectMetadata).
	Secrets    cache.SharedIndexInformer
	ConfigMaps cache.SharedIndexInformer
	// Relay, when set, is bound to the controller: the changes the engine
	// and the agents' reports send it reach the controller, as the
	// informers' events do.
	Relay *Relay
}

// Controller keeps a store of rows in step with the informers behind
// Inputs, one HelmOp at a time: the queue holds HelmOp keys
// ("<namespace>/<name>"), each input change queues only the HelmOps it can
// affect (see events.go), and each sync writes only that HelmOp's rows.
// A status the engine records updates just that row.
type Controller struct {
	inputs Inputs
	// helmOps and bundles are the HelmOp and Bundle informers' indexers,
	// with ListedIndex; bundles is nil when Bundles are not read.
	helmOps cache.Indexer
	bundles cache.Indexer
	store   *memstore.Store[*courier.DownstreamCopy]
	engine  Engine // nil when no copy engine runs
	// recorder receives a Warning Event on a HelmOp for each targeting
	// problem when it first appears (reportProblems); nil records none.
	recorder record.EventRecorder
	// leading says whether this replica records those Events: only the
	// leader does, so that the replicas (each runs the view) do not record
	// every problem once each.
	leading atomic.Bool
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	now     func() time.Time
	// started is set once the informers have synced and every HelmOp is
	// queued: event handlers queue nothing before, the first pass covers it.
	started atomic.Bool

	mu sync.Mutex
	// work is what each queued HelmOp needs done.
	work map[types.NamespacedName]*work
	// rows are the rows each HelmOp has in the store.
	rows  map[types.NamespacedName]*helmOpRows
	since map[string]phaseSince // row key -> when it entered its phase
	// byCluster files the wanted rows under their Cluster (pulled.go),
	// bySource under the source they name, by ListedKey (sources.go).
	byCluster rowIndex[types.NamespacedName]
	bySource  rowIndex[string]
	// initial holds the HelmOps of the first pass not synced yet; nil once
	// they all are.
	initial map[types.NamespacedName]bool
	ready   bool

	// clock decides when a pulled Cluster's agent is overdue and runs the
	// timers that re-evaluate its rows then; dmu guards deadlines and
	// awaiting.
	clock     clock.WithDelayedExecution
	dmu       sync.Mutex
	deadlines map[types.NamespacedName]deadline
	// awaiting are the pulled Clusters whose agent has not reported yet.
	awaiting map[types.NamespacedName]awaitedAgent
}

// work is what a queued HelmOp needs: a full sync, or only some of its
// rows brought up to date: those naming changed sources (by ListedKey),
// the statuses of some, its leftover rows.
type work struct {
	full      bool
	leftovers bool
	sources   map[string]bool
	rows      map[string]bool
}

// helmOpRows is what the view knows of one HelmOp's rows in the store.
type helmOpRows struct {
	// keys are the row keys it has in the store: true for its wanted rows
	// (computed), false for the rows of its leftover copies.
	keys map[string]bool
	// problems are its current targeting problems, each logged once when
	// it appeared.
	problems map[string]bool
	// warned are those of its problems this replica recorded an Event for
	// (while leading).
	warned map[string]bool
}

// Events is how the controller records Warning Events on HelmOps about
// their targeting problems.
type Events struct {
	// Recorder receives the Events; nil records none (the problems are
	// still logged).
	Recorder record.EventRecorder
	// Follower starts the controller not recording until SetLeading(true).
	// With leader election only the leader records them.
	Follower bool
}

type phaseSince struct {
	phase courier.CopyPhase
	at    metav1.Time
}

// NewController returns a controller that keeps the rows in store up to
// date as the informers report changes. It adds ListedIndex to the HelmOp
// informer, so it must be called before that informer starts. engine may
// be nil: the rows then show what the view alone can tell. events says
// where the Warning Events about HelmOps' targeting problems go.
func NewController(inputs Inputs, store *memstore.Store[*courier.DownstreamCopy], engine Engine, informers Informers, events Events) (*Controller, error) {
	if (inputs.Bundles == nil) != (informers.Bundles == nil) {
		return nil, errors.New("copyview: Bundles must be read through both a lister and an informer, or neither")
	}
	if err := informers.HelmOps.AddIndexers(cache.Indexers{ListedIndex: indexListed}); err != nil {
		return nil, err
	}
	c := newController(inputs, store, engine, informers.HelmOps.GetIndexer())
	c.recorder = events.Recorder
	c.leading.Store(!events.Follower)
	handlers := []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{
		{informers.HelmOps, c.helmOpEvents()},
		{informers.Clusters, c.clusterEvents()},
		{informers.ClusterGroups, c.clusterGroupEvents()},
		{informers.Secrets, c.sourceEvents("Secret")},
		{informers.ConfigMaps, c.sourceEvents("ConfigMap")},
	}
	if informers.Bundles != nil {
		if err := informers.Bundles.AddIndexers(cache.Indexers{ListedIndex: indexListed}); err != nil {
			return nil, err
		}
		c.bundles = informers.Bundles.GetIndexer()
		handlers = append(handlers, struct {
			inf     cache.SharedIndexInformer
			handler cache.ResourceEventHandler
		}{informers.Bundles, c.bundleEvents()})
	}
	for _, h := range handlers {
		reg, err := h.inf.AddEventHandler(h.handler)
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, h.inf.HasSynced, reg.HasSynced)
	}
	if inputs.Reports != nil {
		c.synced = append(c.synced, inputs.Reports.HasSynced)
	}
	// Bound last, so that the relay never reaches a controller that failed
	// to be built.
	if informers.Relay != nil {
		informers.Relay.bind(c)
	}
	return c, nil
}

// newController returns a controller without informers; helmOps is an
// indexer of HelmOps with ListedIndex.
func newController(inputs Inputs, store *memstore.Store[*courier.DownstreamCopy], engine Engine, helmOps cache.Indexer) *Controller {
	c := &Controller{
		inputs:  inputs,
		helmOps: helmOps,
		store:   store,
		engine:  engine,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "downstreamcopies"}),
		now:       time.Now,
		work:      map[types.NamespacedName]*work{},
		rows:      map[types.NamespacedName]*helmOpRows{},
		since:     map[string]phaseSince{},
		byCluster: newRowIndex[types.NamespacedName](),
		bySource:  newRowIndex[string](),
		clock:     clock.RealClock{},
		deadlines: map[types.NamespacedName]deadline{},
		awaiting:  map[types.NamespacedName]awaitedAgent{},
	}
	c.leading.Store(true)
	return c
}

// SetLeading says whether this replica records the Warning Events about
// targeting problems; leader election switches it. A replica that starts
// leading records, for every HelmOp, the problems it has not recorded
// itself: the previous leader may have, but an Event twice after a
// failover is better than none when the previous leader did not.
func (c *Controller) SetLeading(leading bool) {
	if c.leading.Swap(leading) == leading || !leading || c.recorder == nil {
		return
	}
	var ops []types.NamespacedName
	c.mu.Lock()
	for op, st := range c.rows {
		if len(st.warned) < len(st.problems) {
			ops = append(ops, op)
		}
	}
	c.mu.Unlock()
	for _, op := range ops {
		c.enqueue(op)
	}
}

// StatusChanged is told what the engine's record changed: the rows named
// get the engine's status again (nothing else is recomputed), and a HelmOp
// whose leftover copies changed gets its leftover rows again.
func (c *Controller) StatusChanged(changes []copycontract.StatusChange) {
	for _, ch := range changes {
		c.mu.Lock()
		w := c.workLocked(ch.HelmOp)
		w.leftovers = w.leftovers || ch.Leftovers
		for _, key := range ch.Rows {
			w.rows[key] = true
		}
		c.mu.Unlock()
		c.queue.Add(ch.HelmOp.String())
	}
}

// enqueue asks for a full sync of a HelmOp.
func (c *Controller) enqueue(op types.NamespacedName) {
	c.mu.Lock()
	c.workLocked(op).full = true
	c.mu.Unlock()
	c.queue.Add(op.String())
}

func (c *Controller) workLocked(op types.NamespacedName) *work {
	w := c.work[op]
	if w == nil {
		w = &work{rows: map[string]bool{}, sources: map[string]bool{}}
		c.work[op] = w
	}
	return w
}

// takeWork returns what a HelmOp needs and forgets it: what is asked from
// now on is queued anew.
//
// Every path that queues a key records its work first, under c.mu, and
// adds the key after. A sync that starts in between takes that work, and
// the Add then queues the key once more with nothing recorded: there is
// nothing left to do. (Treating such a key as a full sync cost a
// recompute of the HelmOp's every row several times per second while the
// engine reported a source change's 1,000 writes: 13 % of Courier's CPU
// in that round at 10,000 rows.)
func (c *Controller) takeWork(op types.NamespacedName) *work {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.work[op]
	delete(c.work, op)
	if w == nil {
		w = &work{}
	}
	return w
}

// Ready reports whether the informers have synced and the first pass put
// every HelmOp's rows in the store: until then a list would show too few
// rows.
func (c *Controller) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Run processes changes until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)

	if !cache.WaitForNamedCacheSync("downstreamcopies", ctx.Done(), c.synced...) {
		return
	}
	if err := c.queueAll(); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Listing HelmOps failed")
		return
	}
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for c.processNext(ctx) {
			}
		}, time.Second)
	}
	logger.Info("Started downstreamcopies view")
	<-ctx.Done()
}

// queueAll starts the first pass: every HelmOp is queued, and the view is
// ready once each has been synced.
func (c *Controller) queueAll() error {
	// Handlers queue from now on. An event whose handler ran before this
	// changed the informer's cache before, so the list below sees it.
	c.started.Store(true)
	keys, err := c.ownerKeys(metav1.NamespaceAll)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.initial = make(map[types.NamespacedName]bool, len(keys))
	for _, key := range keys {
		c.initial[key] = true
	}
	c.mu.Unlock()
	for _, key := range keys {
		c.enqueue(key)
	}
	c.initialDone(types.NamespacedName{}) // no HelmOps: ready at once
	return nil
}

// initialDone records that op has been synced; once every HelmOp of the
// first pass has, the view is ready and the engine is told it has seen
// every HelmOp.
func (c *Controller) initialDone(op types.NamespacedName) {
	c.mu.Lock()
	if c.initial == nil {
		c.mu.Unlock()
		return
	}
	delete(c.initial, op)
	done := len(c.initial) == 0
	if done {
		c.initial = nil
		c.ready = true
	}
	c.mu.Unlock()
	if done && c.engine != nil {
		c.engine.DesiredComplete()
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.process(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing downstreamcopies failed; retrying", "helmop", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// process does what a HelmOp's key was queued for. On an error the HelmOp
// is marked for a full sync, which the retry does.
func (c *Controller) process(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller queues
	}
	op := types.NamespacedName{Namespace: ns, Name: name}
	w := c.takeWork(op)
	full := w.full || (len(w.sources) > 0 && !c.syncSources(ctx, op, w.sources))
	if full {
		err = c.syncOwner(ctx, op)
	} else {
		if w.leftovers {
			c.syncLeftovers(op)
		}
		c.refreshRows(op, w.rows)
	}
	if err != nil {
		c.mu.Lock()
		c.workLocked(op).full = true
		c.mu.Unlock()
		return err
	}
	if w.full {
		c.initialDone(op)
	}
	return nil
}
