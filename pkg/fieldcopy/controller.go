// Package fieldcopy is Courier's k8s-copier successor (docs/design.md#field-copies): it
// watches the objects of the --fieldcopy-target kinds, copies fields of
// other objects into them as their annotations ask, and fills the
// fieldcopies view with one row per rule. Every replica watches and
// computes rows; only the leader writes.
//
// Rules live in annotations, so targets and sources are watched as
// metadata only (name, resourceVersion, the rule annotations). The full
// content of an object is read by GET only when a rule needs it, a source
// some rule names or a target that has rules, and kept until its
// resourceVersion changes or no rule needs it any more (content.go). So
// Courier never holds the data of a Secret no rule names.
package fieldcopy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/fieldcopy/resources"
	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
	"github.com/courier-dev/courier/pkg/memstore"
)

// Resolver turns RESOURCE[.VERSION[.GROUP]] into a served resource;
// *resources.Resolver is the real one.
type Resolver interface {
	Resolve(spec string) (resources.Resolved, error)
}

var _ Resolver = (*resources.Resolver)(nil)

// Config is what the controller needs.
type Config struct {
	// Dynamic reads targets and named sources in full (GET) and writes
	// targets. It never lists or watches.
	Dynamic dynamic.Interface
	// Metadata lists and watches target and source kinds as metadata only.
	Metadata metadata.Interface
	// Shared are metadata-only informers over all namespaces that the
	// process already runs for other purposes (their owner starts them),
	// by resource. Field copies use them for those resources instead of
	// starting a second watch. Optional.
	Shared   map[schema.GroupVersionResource]cache.SharedIndexInformer
	Resolver Resolver
	Store    *memstore.Store[*courier.FieldCopy]
	// Targets are the --fieldcopy-target specs.
	Targets []string
	// Namespaces limits targets (and, without CrossNamespace, sources) to
	// these namespaces; empty means all.
	Namespaces []string
	// CrossNamespace allows sources outside the target's namespace.
	CrossNamespace bool
	// SecretSources allows rules whose source is a Secret
	// (--fieldcopy-secret-sources): Courier cannot see who wrote a rule,
	// so this is safe only with the admission policy that refuses a rule
	// whose author may not get its source.
	SecretSources bool
	// Exports is the export rule every source is judged by before a rule
	// uses it (docs/design.md#export-safety); nil denies only sources
	// annotated courier.dev/export: "false".
	Exports *exportpolicy.Policy
	// Recorder, when set, receives a Warning Event on the target for rules
	// that become Invalid, Refused or Failed.
	Recorder record.EventRecorder
	// Resync is the informers' resync period.
	Resync time.Duration
	// RetryInterval is how often target kinds that do not resolve yet are
	// retried (default 5 s). Rules naming unknown resources and failed
	// writes are retried with the queue's backoff (at most maxBackoff).
	RetryInterval time.Duration
	// Follower starts the controller not leading: it computes rows and
	// writes nothing until SetLeading(true). With leader election every
	// replica starts so.
	Follower bool
}

// maxBackoff bounds the retry backoff of one target: a Forbidden target
// turns Applied at most this long after its RBAC is granted, and a rule
// naming a CRD installed later resolves at most this long after.
const maxBackoff = 2 * time.Minute

// objectKey names one object of one resource; the queue holds target keys,
// the index maps source keys to target keys.
type objectKey struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

func (k objectKey) String() string {
	if k.Namespace == "" {
		return k.GVR.Resource + "/" + k.Name
	}
	return k.GVR.Resource + "/" + k.Namespace + "/" + k.Name
}

// informerKey is one watch: a resource in one namespace ("" for all).
type informerKey struct {
	GVR       schema.GroupVersionResource
	Namespace string
}

// droppedWrite remembers a write whose value the API server did not keep
// (a status field, a pruned field), so the same write is not repeated in a
// loop: it is retried only when the target or the wanted value changes.
type droppedWrite struct {
	resourceVersion string
	wanted          map[string]any
}

// Controller keeps targets and the fieldcopies rows in step with sources.
type Controller struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[objectKey]
	now   func() time.Time

	// publishMu is held from changing rows to storing them (rows.go), so
	// Replace calls happen in the order their snapshots were taken.
	publishMu sync.Mutex

	mu         sync.Mutex
	ctx        context.Context // set by Run; informers started later use it
	leading    bool
	unresolved []string // target specs that do not resolve yet
	// retrying holds the target specs already logged as unresolved; only
	// resolveTargets, which never runs concurrently with itself, uses it.
	retrying map[string]bool
	// targets and sources are metadata-only watches; one informer may be
	// in both maps, and may be one of cfg.Shared.
	targets      map[informerKey]cache.SharedIndexInformer
	targetSynced []cache.InformerSynced
	sources      map[informerKey]cache.SharedIndexInformer
	index        map[objectKey]map[objectKey]bool // source -> targets that read it
	uses         map[objectKey][]objectKey        // target -> sources it reads
	// sourceContent holds the last full read of each source some rule
	// names (a key of index), targetContent that of each target with
	// rules; an entry is used only while the watch shows the same
	// resourceVersion (content.go).
	sourceContent map[objectKey]*unstructured.Unstructured
	targetContent map[objectKey]*unstructured.Unstructured
	rows          map[objectKey][]*courier.FieldCopy
	lastApplied   map[string]metav1.Time // row key -> lastAppliedTime
	since         map[string]phaseSince  // row key -> when it entered its phase
	dropped       map[objectKey]droppedWrite
	// retracted names, by target, the rules whose destination Courier
	// emptied because their source became denied (exports.go), so that
	// their rows keep saying so after the write that did it.
	retracted map[objectKey]map[string]bool
}

type phaseSince struct {
	phase courier.FieldCopyPhase
	at    metav1.Time
}

// NewController returns a controller; Run starts it. It leads unless
// cfg.Follower; SetLeading switches.
func NewController(cfg Config) *Controller {
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 5 * time.Second
	}
	registerMetrics()
	return &Controller{
		cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[objectKey](5*time.Millisecond, maxBackoff),
				&workqueue.TypedBucketRateLimiter[objectKey]{Limiter: rate.NewLimiter(rate.Limit(10), 100)}),
			workqueue.TypedRateLimitingQueueConfig[objectKey]{Name: "courier_fieldcopies"}),
		now:           time.Now,
		leading:       !cfg.Follower,
		unresolved:    append([]string(nil), cfg.Targets...),
		retrying:      map[string]bool{},
		targets:       map[informerKey]cache.SharedIndexInformer{},
		sources:       map[informerKey]cache.SharedIndexInformer{},
		index:         map[objectKey]map[objectKey]bool{},
		uses:          map[objectKey][]objectKey{},
		sourceContent: map[objectKey]*unstructured.Unstructured{},
		targetContent: map[objectKey]*unstructured.Unstructured{},
		rows:          map[objectKey][]*courier.FieldCopy{},
		lastApplied:   map[string]metav1.Time{},
		since:         map[string]phaseSince{},
		dropped:       map[objectKey]droppedWrite{},
		retracted:     map[objectKey]map[string]bool{},
	}
}

// SetLeading says whether this replica writes targets; leader election
// calls it. Every replica watches and computes rows either way.
func (c *Controller) SetLeading(leading bool) {
	c.mu.Lock()
	was := c.leading
	c.leading = leading
	c.mu.Unlock()
	// A new leader writes what followers only computed; a replica that
	// stops leading shows Pending where a write is still due.
	if leading != was {
		c.enqueueAllTargets()
	}
}

func (c *Controller) isLeading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

// Ready reports whether Run has started and every target kind resolved so
// far has its watch synced and every object it listed queued: before that
// a list of rows would miss targets Courier has not even seen. (Rows
// follow within the first pass of the queue.)
func (c *Controller) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return false
	}
	for _, synced := range c.targetSynced {
		if !synced() {
			return false
		}
	}
	return true
}

// Run starts the watches and workers and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()

	// Target kinds that do not resolve yet (a CRD not installed yet) are
	// retried; they never stop the others.
	go wait.UntilWithContext(ctx, c.resolveTargets, c.cfg.RetryInterval)
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for c.processNext(ctx) {
			}
		}, time.Second)
	}
	logger.Info("Started fieldcopies controller", "targets", c.cfg.Targets, "namespaces", c.cfg.Namespaces)
	<-ctx.Done()
}

// resolveTargets starts watches for the target kinds that resolve now.
func (c *Controller) resolveTargets(ctx context.Context) {
	c.mu.Lock()
	specs := c.unresolved
	c.mu.Unlock()
	var still []string
	for _, spec := range specs {
		res, err := c.cfg.Resolver.Resolve(spec)
		if err != nil {
			// Said once at the default verbosity: the kind may simply be
			// a CRD not installed yet, retried every RetryInterval.
			logger := klog.FromContext(ctx)
			if c.retrying[spec] {
				logger = logger.V(4)
			}
			logger.Info("Field-copy target kind does not resolve yet; retrying", "target", spec, "err", err)
			c.retrying[spec] = true
			still = append(still, spec)
			continue
		}
		namespaces := c.cfg.Namespaces
		if len(namespaces) == 0 || !res.Namespaced {
			namespaces = []string{""}
		}
		for _, ns := range namespaces {
			c.startTargetInformer(ctx, informerKey{GVR: res.GVR, Namespace: ns})
		}
		klog.FromContext(ctx).Info("Watching field-copy targets", "target", spec, "resource", res.GVR.String())
	}
	c.mu.Lock()
	c.unresolved = still
	c.mu.Unlock()
}

func (c *Controller) startTargetInformer(ctx context.Context, key informerKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.targets[key]; ok {
		return
	}
	inf, run := c.informerLocked(key)
	// Only objects with rule annotations are targets: an object without
	// them is queued only when it just lost them (its rows must go), so
	// that a busy kind (every Secret of a cluster) costs a map lookup per
	// event, not a pass of the queue.
	enqueue := func(obj any, force bool) {
		k, ok := keyOf(key.GVR, obj)
		if !ok || !key.holds(k) {
			return
		}
		if force || hasRules(obj) {
			c.queue.Add(k)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(obj, false) },
		UpdateFunc: func(old, obj any) { enqueue(obj, hasRules(old)) },
		DeleteFunc: func(obj any) { enqueue(obj, true) },
	})
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Adding a handler to a field-copy target informer failed", "resource", key.GVR.String())
		return
	}
	c.targets[key] = inf
	c.targetSynced = append(c.targetSynced, inf.HasSynced, reg.HasSynced)
	if run {
		go inf.Run(ctx.Done())
	}
}

// holds reports whether object k belongs to this watch: a shared informer
// over all namespaces may stand in for a watch of one namespace.
func (k informerKey) holds(o objectKey) bool {
	return k.Namespace == "" || k.Namespace == o.Namespace
}

// sourceInformer returns the watch that holds source objects of gvr in
// namespace, creating and starting it the first time. A worker never waits
// for it to sync: synced is false until it has.
func (c *Controller) sourceInformer(gvr schema.GroupVersionResource, namespace string) (inf cache.SharedIndexInformer, synced bool) {
	key := informerKey{GVR: gvr, Namespace: ""}
	if namespace != "" && !c.cfg.CrossNamespace && len(c.cfg.Namespaces) > 0 {
		// Only same-namespace sources are allowed, and targets live only in
		// these namespaces: watch just the namespace, which also works with
		// namespaced RBAC.
		key.Namespace = namespace
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.sources[key]; ok {
		return inf, inf.HasSynced()
	}
	inf, run := c.informerLocked(key)
	notify := func(obj any) {
		k, ok := keyOf(gvr, obj)
		if !ok {
			return
		}
		c.mu.Lock()
		targets := make([]objectKey, 0, len(c.index[k]))
		for t := range c.index[k] {
			targets = append(targets, t)
		}
		c.mu.Unlock()
		for _, t := range targets {
			c.queue.Add(t)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		utilruntime.HandleError(fmt.Errorf("adding a handler to the %s source informer: %w", gvr, err))
	}
	c.sources[key] = inf
	if !run {
		return inf, inf.HasSynced()
	}
	go inf.Run(c.ctx.Done())
	// Targets that asked before the watch synced are requeued by the
	// worker (see reconcile); nothing waits here.
	return inf, false
}

// informerLocked returns the metadata-only watch for key: one the process
// already runs (cfg.Shared, over all namespaces), the one of the same key
// already watching targets or sources (a kind that is both is watched
// once), or a new one, which the caller must run (run is true).
func (c *Controller) informerLocked(key informerKey) (inf cache.SharedIndexInformer, run bool) {
	if inf, ok := c.cfg.Shared[key.GVR]; ok {
		return inf, false
	}
	if inf, ok := c.targets[key]; ok {
		return inf, false
	}
	if inf, ok := c.sources[key]; ok {
		return inf, false
	}
	inf = metadatainformer.NewFilteredMetadataInformer(c.cfg.Metadata, key.GVR, key.Namespace, c.cfg.Resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	if err := inf.SetTransform(trimMetadata); err != nil {
		// Only possible once the informer has started, and it has not.
		utilruntime.HandleError(fmt.Errorf("trimming the %s informer: %w", key.GVR, err))
	}
	return inf, true
}

// keyOf returns the key of an informer's object, including tombstones.
func keyOf(gvr schema.GroupVersionResource, obj any) (objectKey, bool) {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return objectKey{}, false
	}
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return objectKey{}, false
	}
	return objectKey{GVR: gvr, Namespace: ns, Name: name}, true
}

// hasRules reports whether an informer's object carries rule annotations.
func hasRules(obj any) bool {
	m, err := meta.Accessor(obj)
	return err == nil && rules.HasRules(m.GetAnnotations())
}

// targetInformer returns the informer that holds target key, if any.
func (c *Controller) targetInformer(key objectKey) cache.SharedIndexInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.targets[informerKey{GVR: key.GVR, Namespace: key.Namespace}]; ok {
		return inf
	}
	return c.targets[informerKey{GVR: key.GVR}]
}

// enqueueAllTargets queues every object with rules of every target watch.
func (c *Controller) enqueueAllTargets() {
	c.mu.Lock()
	keys := make([]informerKey, 0, len(c.targets))
	infs := make([]cache.SharedIndexInformer, 0, len(c.targets))
	for k, inf := range c.targets {
		keys = append(keys, k)
		infs = append(infs, inf)
	}
	c.mu.Unlock()
	for i, inf := range infs {
		for _, obj := range inf.GetStore().List() {
			if k, ok := keyOf(keys[i].GVR, obj); ok && keys[i].holds(k) && hasRules(obj) {
				c.queue.Add(k)
			}
		}
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	again, err := c.reconcile(ctx, key)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Reconciling field copies failed; retrying", "target", key.String())
		c.queue.AddRateLimited(key)
	case again.backoff:
		c.queue.AddRateLimited(key)
	default:
		c.queue.Forget(key)
	}
	if err == nil && again.after > 0 {
		c.queue.AddAfter(key, again.after)
	}
	return true
}
