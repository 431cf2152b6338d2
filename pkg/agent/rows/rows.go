// Package rows hands a courier-agent's rows to the copy engine. The agent
// watches the downstreamcopies of its own Cluster (the only ones Courier
// lets it see, docs/design.md#pull-delivery) and gives the engine each HelmOp's rows, as the
// view does on the management side: the engine then works exactly as for
// push, with one Cluster.
package rows

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	informers "github.com/courier-dev/courier/pkg/generated/informers/externalversions"
)

// Desired is what the rows are handed to: the copy engine.
type Desired interface {
	SetDesired(helmOp types.NamespacedName, rows []*courier.DownstreamCopy)
	DesiredComplete()
}

// byHelmOp indexes rows by spec.helmOp.
const byHelmOp = "helmOp"

// Controller keeps the engine's desired state equal to the agent's rows.
type Controller struct {
	namespace, cluster string
	agentNamespace     string
	factory            informers.SharedInformerFactory
	informer           cache.SharedIndexInformer
	queue              workqueue.TypedRateLimitingInterface[string] // HelmOp names
	// changed, when set, is told of every row event (the agent waits on it
	// for a first row to learn the upstream id from).
	changed chan struct{}
}

// New returns a Controller over the rows of Cluster namespace/cluster,
// listed and watched with the field selector spec.cluster=<cluster> that
// Courier requires of an agent. A row's ServiceAccount is taken to be in
// agentNamespace: the agent's --agent-namespace, which decides, in its own
// cluster, where ServiceAccounts live (docs/design.md#pull-delivery).
func New(client versioned.Interface, namespace, cluster, agentNamespace string) (*Controller, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Hour,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.cluster=" + cluster }))
	inf := factory.Courier().V1alpha1().DownstreamCopies().Informer()
	if err := inf.AddIndexers(cache.Indexers{byHelmOp: func(obj any) ([]string, error) {
		if r, ok := obj.(*v1alpha1.DownstreamCopy); ok {
			return []string{ownerName(r)}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	c := &Controller{
		namespace: namespace, cluster: cluster, agentNamespace: agentNamespace,
		factory: factory, informer: inf,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "courier_agent_helmops"}),
		changed: make(chan struct{}, 1),
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	return c, err
}

func (c *Controller) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	r, ok := obj.(*v1alpha1.DownstreamCopy)
	if !ok {
		return
	}
	c.queue.Add(ownerName(r))
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// ownerName is the name of a row's owner key (copycontract.OwnerKey): a
// HelmOp's name, or bundle:<name> for a Bundle; the engine files copies,
// and the owner label hashes, under it.
func ownerName(r *v1alpha1.DownstreamCopy) string {
	return copycontract.OwnerKey(r.Namespace, courier.DownstreamCopySpec{
		Owner:  courier.CopyOwner{Kind: courier.OwnerKind(r.Spec.Owner.Kind), Name: r.Spec.Owner.Name},
		HelmOp: r.Spec.HelmOp,
	}).Name
}

// Start starts the watch of the rows; WaitForSync waits for its first
// list.
func (c *Controller) Start(ctx context.Context) { c.factory.Start(ctx.Done()) }

// WaitForSync waits until the rows are listed, or ctx is done.
func (c *Controller) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced)
}

// HasSynced reports whether the rows have been listed.
func (c *Controller) HasSynced() bool { return c.informer.HasSynced() }

// Changed is signalled (without blocking, coalesced) on every row event.
func (c *Controller) Changed() <-chan struct{} { return c.changed }

// Row returns the row at key ("<namespace>/<name>") as Courier last sent it.
func (c *Controller) Row(key string) (*v1alpha1.DownstreamCopy, bool) {
	obj, ok, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	r, ok := obj.(*v1alpha1.DownstreamCopy)
	return r, ok
}

// Keys returns the keys of the rows the engine is given, sorted.
func (c *Controller) Keys() []string {
	var keys []string
	for _, obj := range c.informer.GetIndexer().List() {
		if r, ok := obj.(*v1alpha1.DownstreamCopy); ok && c.wanted(r) {
			keys = append(keys, r.Namespace+"/"+r.Name)
		}
	}
	sort.Strings(keys)
	return keys
}

// Copyable returns the keys of the rows that have a payload to read,
// sorted.
func (c *Controller) Copyable() []string {
	var keys []string
	for _, obj := range c.informer.GetIndexer().List() {
		r, ok := obj.(*v1alpha1.DownstreamCopy)
		if !ok || !c.wanted(r) || !courier.Delivered(r.Labels) {
			continue // a Denied row has no payload
		}
		if in, err := c.internal(r); err == nil && copycontract.Copyable(in.Spec) {
			keys = append(keys, r.Namespace+"/"+r.Name)
		}
	}
	sort.Strings(keys)
	return keys
}

// wanted reports whether a row is one the engine is handed: its Cluster's,
// and delivered (courier.LabelDeliver) or Denied -- not a leftover copy
// no HelmOp wants any more (Kept, Deleting). The engine writes nothing
// for a Denied row: it removes its copy, even one written with
// keepResources, and looks for Fleet's own (docs/design.md#export-safety).
// The label decides whether a copy is delivered; a row not delivered is
// Denied only by the server's view, never by an agent's report.
func (c *Controller) wanted(r *v1alpha1.DownstreamCopy) bool {
	if r.Namespace != c.namespace || r.Spec.Cluster != c.cluster {
		return false
	}
	return courier.Delivered(r.Labels) || string(r.Status.Phase) == string(courier.CopyPhaseDenied)
}

// internal converts a row for the engine, with its ServiceAccount in the
// agent's namespace.
func (c *Controller) internal(r *v1alpha1.DownstreamCopy) (*courier.DownstreamCopy, error) {
	out := &courier.DownstreamCopy{}
	if err := v1alpha1.Convert_v1alpha1_DownstreamCopy_To_courier_DownstreamCopy(r, out, nil); err != nil {
		return nil, err
	}
	if sa := out.Spec.ServiceAccount; sa != "" {
		_, name, found := strings.Cut(sa, "/")
		if !found {
			name = sa
		}
		out.Spec.ServiceAccount = c.agentNamespace + "/" + name
	}
	return out, nil
}

// handOver gives the engine one HelmOp's rows (nil when it has none).
func (c *Controller) handOver(desired Desired, helmOp string) error {
	objs, err := c.informer.GetIndexer().ByIndex(byHelmOp, helmOp)
	if err != nil {
		return err
	}
	var rows []*courier.DownstreamCopy
	for _, obj := range objs {
		r, ok := obj.(*v1alpha1.DownstreamCopy)
		if !ok || !c.wanted(r) {
			continue
		}
		in, err := c.internal(r)
		if err != nil {
			return fmt.Errorf("row %s/%s: %w", r.Namespace, r.Name, err)
		}
		rows = append(rows, in)
	}
	desired.SetDesired(types.NamespacedName{Namespace: c.namespace, Name: helmOp}, rows)
	return nil
}

// Run hands every HelmOp's rows to desired, then DesiredComplete, then
// each HelmOp again whenever one of its rows changes, until ctx is done.
// Call it once the rows have synced. Until DesiredComplete the engine
// writes and removes nothing, so it must come only after every HelmOp.
func (c *Controller) Run(ctx context.Context, desired Desired) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	for _, op := range c.informer.GetIndexer().ListIndexFuncValues(byHelmOp) {
		if err := c.handOver(desired, op); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Handing rows over", "helmop", op)
			c.queue.Add(op)
		}
	}
	desired.DesiredComplete()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.processNext(ctx, desired) {
	}
}

func (c *Controller) processNext(ctx context.Context, desired Desired) bool {
	op, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(op)
	if err := c.handOver(desired, op); err != nil {
		klog.FromContext(ctx).V(2).Info("Handing rows over failed; retrying", "helmop", op, "err", err)
		c.queue.AddRateLimited(op)
		return true
	}
	c.queue.Forget(op)
	return true
}
