package copyview

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/registry/memstore"
)

// recomputeKey is the only key in the queue: any change to any input
// recomputes every row, and the queue folds a burst of changes into one pass.
const recomputeKey = "rows"

// Controller keeps a store of rows in step with the informers behind Inputs.
type Controller struct {
	inputs Inputs
	store  *memstore.Store[*courier.DownstreamCopy]
	engine Engine // nil when no copy engine runs
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	now    func() time.Time

	mu       sync.Mutex
	since    map[string]phaseSince // row key -> when it entered its phase
	problems map[string]bool       // targeting problems already logged
	ready    bool
}

type phaseSince struct {
	phase courier.CopyPhase
	at    metav1.Time
}

// NewController returns a controller that recomputes the rows into store
// whenever one of the given informers reports a change. engine may be nil:
// the rows then show what the view alone can tell.
func NewController(inputs Inputs, store *memstore.Store[*courier.DownstreamCopy], engine Engine, informers ...cache.SharedIndexInformer) (*Controller, error) {
	c := &Controller{
		inputs: inputs,
		store:  store,
		engine: engine,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "downstreamcopies"}),
		now:      time.Now,
		since:    map[string]phaseSince{},
		problems: map[string]bool{},
	}
	enqueue := func(any) { c.queue.Add(recomputeKey) }
	for _, inf := range informers {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, _ any) { c.queue.Add(recomputeKey) },
			DeleteFunc: enqueue,
		})
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, inf.HasSynced, reg.HasSynced)
	}
	return c, nil
}

// Enqueue asks for a recompute, for example because the engine recorded a
// new status.
func (c *Controller) Enqueue() { c.queue.Add(recomputeKey) }

// Ready reports whether the informers have synced and the first full set of
// rows is in the store: until then a list would show too few rows.
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
	c.queue.Add(recomputeKey)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for c.processNext(ctx) {
		}
	}, time.Second)
	logger.Info("Started downstreamcopies view")
	<-ctx.Done()
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.recompute(ctx); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Recomputing downstreamcopies failed; retrying")
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) recompute(ctx context.Context) error {
	rows, problems, err := Compute(c.inputs)
	if err != nil {
		return err
	}
	if c.engine != nil {
		c.engine.SetDesired(rows)
		for _, r := range rows {
			if st, ok := c.engine.Status(r.Namespace + "/" + r.Name); ok {
				overlay(r, st)
			}
		}
		rows = withLeftovers(rows, c.engine.Leftovers())
	}
	c.mu.Lock()
	c.logNewProblems(ctx, problems)
	c.stampTransitions(rows)
	c.mu.Unlock()
	c.store.Replace(rows)
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	return nil
}

// stampTransitions sets each row's Ready condition LastTransitionTime to
// when the row entered its current phase, and forgets rows that are gone.
func (c *Controller) stampTransitions(rows []*courier.DownstreamCopy) {
	seen := make(map[string]bool, len(rows))
	now := metav1.NewTime(c.now().Truncate(time.Second))
	for _, r := range rows {
		key := r.Namespace + "/" + r.Name
		seen[key] = true
		s, ok := c.since[key]
		if !ok || s.phase != r.Status.Phase {
			s = phaseSince{phase: r.Status.Phase, at: now}
			c.since[key] = s
		}
		for i := range r.Status.Conditions {
			r.Status.Conditions[i].LastTransitionTime = s.at
		}
		r.CreationTimestamp = now
	}
	for key := range c.since {
		if !seen[key] {
			delete(c.since, key)
		}
	}
}

// logNewProblems logs each targeting problem once, when it first appears,
// rather than on every recompute.
func (c *Controller) logNewProblems(ctx context.Context, problems []Problem) {
	current := make(map[string]bool, len(problems))
	for _, p := range problems {
		key := p.HelmOp.String() + ": " + p.Err.Error()
		current[key] = true
		if !c.problems[key] {
			klog.FromContext(ctx).Info("HelmOp target matches no cluster", "helmop", p.HelmOp, "problem", p.Err.Error())
		}
	}
	c.problems = current
}
