package server

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/agentauth"
	"github.com/courier-dev/courier/pkg/apis/courier"
	fleetv1alpha1 "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/copyview"
	"github.com/courier-dev/courier/pkg/downstream"
	"github.com/courier-dev/courier/pkg/engine"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	"github.com/courier-dev/courier/pkg/fieldcopy"
	fleetclient "github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	fleetinformers "github.com/courier-dev/courier/pkg/generated/informers/externalversions"
	"github.com/courier-dev/courier/pkg/internal/kubeproto"
	"github.com/courier-dev/courier/pkg/liveness"
	"github.com/courier-dev/courier/pkg/memstore"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopy"
	"github.com/courier-dev/courier/pkg/sharding"
)

// informerResync is long: everything reacts to watch events, and a resync
// only re-delivers what the caches already hold.
const informerResync = 10 * time.Hour

// upstreamID returns --upstream-id, or the UID of the upstream cluster's
// kube-system namespace.
func (o *Options) upstreamID(ctx context.Context, config *rest.Config) (string, error) {
	if o.UpstreamID != "" {
		return o.UpstreamID, nil
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return "", err
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("identifying the upstream cluster (set --upstream-id to skip): %w", err)
	}
	return string(ns.UID), nil
}

// views are the informers, the copy engine and the controllers that fill
// the view stores.
type views struct {
	fleetInformers    fleetinformers.SharedInformerFactory
	metadataInformers metadatainformer.SharedInformerFactory
	controller        *copyview.Controller
	// relay carries the engine's and the reports' changes to controller,
	// which is built after them; NewController binds it.
	relay            *copyview.Relay
	engine           *engine.Engine
	downstream       *downstream.Cache
	events           record.EventBroadcaster
	downstreamCopies *memstore.Store[*courier.DownstreamCopy]
	fieldCopies      *memstore.Store[*courier.FieldCopy]
	fieldCopy        *fieldcopy.Controller // nil without --fieldcopy-target
	// upstream is the upstream cluster's client, as Courier.
	upstream kubernetes.Interface
	// exports decides which sources may be exported at all (docs/design.md#export-safety);
	// the view decides rows with it, and every source read for
	// copying is guarded by it.
	exports *exportpolicy.Policy
	// agents indexes the Fleet Clusters by their agent's user
	// (delivery.Of), for pull delivery (agents.go).
	agents *agentauth.ClusterIndex
	// reports keeps the agents' reports, read through reportInformer.
	reports        *clusterstatus.Store
	reportInformer cache.SharedIndexInformer
	// liveness keeps the agents' heartbeats apart from their reports,
	// read through livenessInformer (agents.go).
	liveness         *liveness.Tracker
	livenessInformer cache.SharedIndexInformer
	// readBundles is true when the upstream serves Bundles (bundles.go).
	readBundles bool
	// shards holds this replica's buckets; nil with sharding off
	// (sharding.go).
	shards *sharding.Manager
}

// newViews builds every replica's part: the upstream informers, the export
// rule, the copy engine, the agents' reports, the view controller and the
// field copies. Each step is a function of its own below, in the order the
// later ones need the earlier.
func newViews(config *rest.Config, upstreamID string, o *Options) (*views, error) {
	v, err := newInformers(config)
	if err != nil {
		return nil, err
	}
	if v.readBundles, err = servesBundles(config); err != nil {
		return nil, err
	}
	if !v.readBundles {
		klog.InfoS("The upstream serves no fleet.cattle.io Bundles: only HelmOps are read; restart Courier after installing the Bundle CRD")
	}
	fleet := v.fleetInformers.Fleet().V1alpha1()
	if v.agents, err = agentauth.NewClusterIndex(fleet.Clusters().Informer()); err != nil {
		return nil, err
	}
	kubeconfigClusters, err := exportpolicy.NewInformerClusters(fleet.Clusters().Informer())
	if err != nil {
		return nil, err
	}
	v.exports = exportpolicy.New(o.DenySensitiveExports, kubeconfigClusters)
	sources, err := v.watchSources()
	if err != nil {
		return nil, err
	}
	// The status objects first: the engine publishes its pushed Clusters'
	// statuses to them.
	if err := v.newReports(config, v.upstream, o.AgentReportNamespace); err != nil {
		return nil, err
	}
	if err := v.newEngine(config, upstreamID, o, sources); err != nil {
		return nil, err
	}
	if err := v.newController(o, sources); err != nil {
		return nil, err
	}
	// Field copies watch Secrets and ConfigMaps through the same metadata
	// informers, whether as targets or as sources.
	if v.fieldCopy, err = newFieldCopies(config, v.fieldCopies, v.events, o.FieldCopy, o.LeaderElection.LeaderElect, sources.shared(), v.exports); err != nil {
		return nil, err
	}
	return v, nil
}

// newInformers makes the upstream clients, the informer factories, the
// event broadcaster and the two view stores; nothing is watched yet.
func newInformers(config *rest.Config) (*views, error) {
	fleetClient, err := fleetclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	metaClient, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	// Built-in types only: protobuf (kubeproto). Each status object a
	// replica writes reaches every replica's informer through it.
	kube, err := kubernetes.NewForConfig(kubeproto.Config(config))
	if err != nil {
		return nil, err
	}
	return &views{
		fleetInformers:    fleetinformers.NewSharedInformerFactory(fleetClient, informerResync),
		metadataInformers: metadatainformer.NewSharedInformerFactory(metaClient, informerResync),
		relay:             &copyview.Relay{},
		events:            record.NewBroadcaster(),
		downstreamCopies:  memstore.New[*courier.DownstreamCopy](downstreamcopy.WatchIndex(), downstreamcopy.EventCopy()),
		fieldCopies:       memstore.New[*courier.FieldCopy](),
		upstream:          kube,
	}, nil
}

var (
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
)

// sourceInformers are the metadata-only informers of upstream Secrets and
// ConfigMaps, shared by the view, the downstream cache (kubeconfig
// Secrets' resourceVersions) and the field copies.
type sourceInformers struct {
	secrets, configMaps informers.GenericInformer
}

// watchSources registers the source informers. Sources are watched as
// metadata only: Courier never holds the data of Secrets it does not copy.
// It reads in full only the sources it copies and the kubeconfig Secrets
// of Clusters.
func (v *views) watchSources() (sourceInformers, error) {
	s := sourceInformers{
		secrets:    v.metadataInformers.ForResource(secretsGVR),
		configMaps: v.metadataInformers.ForResource(configMapsGVR),
	}
	for _, inf := range []cache.SharedIndexInformer{s.secrets.Informer(), s.configMaps.Informer()} {
		if err := inf.SetTransform(trimMetadata); err != nil {
			return sourceInformers{}, err
		}
	}
	return s, nil
}

// shared lists the source informers by resource, for the field copies.
func (s sourceInformers) shared() map[schema.GroupVersionResource]cache.SharedIndexInformer {
	return map[schema.GroupVersionResource]cache.SharedIndexInformer{
		secretsGVR:    s.secrets.Informer(),
		configMapsGVR: s.configMaps.Informer(),
	}
}

// The engine is the view's copycontract deliverer for pushed Clusters: the
// view defines the interface where it uses it, the engine does not import
// the view, and this is where the two meet.
var _ copyview.Engine = (*engine.Engine)(nil)

// newEngine builds the downstream cache and the copy engine it feeds, and
// starts sending the engine's Events upstream.
func (v *views) newEngine(config *rest.Config, upstreamID string, o *Options, sources sourceInformers) error {
	// The downstream watches report to the engine, built after them from
	// the cache they fill: they are handed a sink the engine binds to.
	copyEvents := &engine.CopyEvents{}
	kubeconfigs, err := kubeconfigReader(config)
	if err != nil {
		return err
	}
	fleet := v.fleetInformers.Fleet().V1alpha1()
	shards, shardCfg, err := o.newShards(config, fleet.Clusters().Lister(), func(gained, lost []int) { v.engine.BucketsChanged(gained, lost) })
	if err != nil {
		return err
	}
	v.shards = shards
	v.downstream = downstream.NewCache(secretSource{lister: sources.secrets.Lister(), kube: kubeconfigs}, downstream.Options{
		WatchSelector: func(c *fleetv1alpha1.Cluster) labels.Selector {
			return copyspec.ClusterSelector(upstreamID, c.Namespace, c.Name)
		},
		// Clusters that reach one kube-apiserver as one user share its
		// watches; the cluster-hash label tells their copies apart.
		ShareLabel:      copyspec.LabelClusterHash,
		LegacySelector:  copyspec.UnlabelledSelector(),
		ForeignSelector: copyspec.FleetCopySelector(),
		OnChange:        copyEvents.CopyChanged,
		// Downstream audit logs tell the replicas apart by it.
		UserAgent: o.Shards.userAgent(),
	})
	v.engine = engine.New(engine.Config{
		UpstreamID: upstreamID,
		Upstream:   v.upstream,
		Clusters:   fleet.Clusters().Lister(),
		HelmOps:    fleet.HelmOps().Lister(),
		Bundles:    v.bundleLister(),
		Downstream: v.downstream,
		CopyEvents: copyEvents,
		Recorder:   v.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "courier"}),
		// The view controller is built after the engine, from it: the
		// engine's changes reach it through the relay it binds.
		OnStatusChange: v.relay.StatusChanged,
		// What the deliverer of a pushed Cluster recorded is kept upstream
		// in the Cluster's status object, for every replica to serve.
		Publish: v.publishStatuses,
		// Every source read for a copy is checked against the export rule,
		// whatever the view handed over.
		Sources:               engine.UpstreamSources{Client: v.upstream, Guard: v.exports.Guard},
		Workers:               o.CopyWorkers,
		AgentNamespace:        o.AgentNamespace,
		RequireServiceAccount: o.RequireServiceAccount,
		// With leader election every replica starts observing and writes
		// only once it holds the Lease; with sharding, for the Clusters of
		// the buckets it holds.
		Follower: o.LeaderElection.LeaderElect,
		Shards:   shardCfg,
	})
	v.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: v.upstream.CoreV1().Events("")})
	return nil
}

// newController builds the view controller: the rows computed from the
// upstream inputs, handed to the engine, written to the downstreamcopies
// store.
func (v *views) newController(o *Options, sources sourceInformers) error {
	fleet := v.fleetInformers.Fleet().V1alpha1()
	inputs := copyview.Inputs{
		HelmOps:        fleet.HelmOps().Lister(),
		Clusters:       fleet.Clusters().Lister(),
		ClusterGroups:  fleet.ClusterGroups().Lister(),
		Secrets:        sources.secrets.Lister(),
		ConfigMaps:     sources.configMaps.Lister(),
		AgentNamespace: o.AgentNamespace,
		Reports:        v.reports,
		Exports:        v.exports,
		SecretTypes:    exportpolicy.NewSecretTypes(v.upstream.CoreV1().RESTClient()),
	}
	informers := copyview.Informers{
		HelmOps:       fleet.HelmOps().Informer(),
		Clusters:      fleet.Clusters().Informer(),
		ClusterGroups: fleet.ClusterGroups().Informer(),
		Secrets:       sources.secrets.Informer(),
		ConfigMaps:    sources.configMaps.Informer(),
		Relay:         v.relay,
	}
	if v.readBundles {
		inputs.Bundles = v.bundleLister()
		informers.Bundles = fleet.Bundles().Informer()
	}
	var err error
	v.controller, err = copyview.NewController(inputs, v.downstreamCopies, v.engine, informers, copyview.Events{
		Recorder: v.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "courier"}),
		Follower: o.LeaderElection.LeaderElect,
	})
	return err
}

// start starts what every replica runs: the informers and the view
// controller. The engine runs in runControllers.
func (v *views) start(ctx context.Context) {
	v.fleetInformers.Start(ctx.Done())
	v.metadataInformers.Start(ctx.Done())
	go v.reportInformer.Run(ctx.Done())
	go v.livenessInformer.Run(ctx.Done())
	go v.liveness.Run(klog.NewContext(ctx, klog.Background().WithName("agent-liveness")))
	go v.sweepReports(klog.NewContext(ctx, klog.Background().WithName("agent-reports")))
	startFieldCopies(ctx, v.fieldCopy)
	go v.controller.Run(klog.NewContext(ctx, klog.Background().WithName("downstreamcopies")))
}

// setLeading switches the writers on or off as this replica gains or
// loses the Lease.
func (v *views) setLeading(leading bool) {
	v.engine.SetLeading(leading)
	v.controller.SetLeading(leading)
	if v.fieldCopy != nil {
		v.fieldCopy.SetLeading(leading)
	}
}

// stop releases what the engine used, after it has stopped.
func (v *views) stop() {
	v.liveness.Flush()
	v.downstream.Stop()
	v.events.Shutdown()
}

// secretSource reads kubeconfig Secrets for the downstream cache: their
// resourceVersion from the metadata informer, their content by GET.
// Kubeconfig Secrets are read with a client of their own. Each is read
// once, when its Cluster's client is first built, and again only when the
// metadata informer shows it changed: a fleet's worth at Courier's start
// or when a HelmOp first targets many Clusters, then next to nothing. In
// Courier's shared budget (50/s, burst 100) the first pass over 1,000
// Clusters waited 18 s for their kubeconfigs before it could write
// anything (`make bench`, N=1,000: a new HelmOp's copies took 18.8 s
// against the pool's 9.2 s, 300 ms per Cluster, the bucket's pace). The
// burst covers a fleet's first reads; at most --copy-workers of them are
// in flight at once.
const (
	kubeconfigQPS   = 100
	kubeconfigBurst = 1000
)

// kubeconfigReader is the client kubeconfig Secrets are read with.
func kubeconfigReader(config *rest.Config) (kubernetes.Interface, error) {
	rc := kubeproto.Config(rest.CopyConfig(config))
	rc.QPS, rc.Burst, rc.RateLimiter = kubeconfigQPS, kubeconfigBurst, nil
	return kubernetes.NewForConfig(rc)
}

type secretSource struct {
	lister cache.GenericLister
	kube   kubernetes.Interface
}

var _ downstream.SecretSource = secretSource{}

func (s secretSource) ResourceVersion(namespace, name string) (string, bool) {
	obj, err := s.lister.ByNamespace(namespace).Get(name)
	if err != nil {
		return "", false
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", false
	}
	return m.GetResourceVersion(), true
}

func (s secretSource) Get(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return s.kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// trimMetadata drops, before caching, what the views never read of a
// Secret's or ConfigMap's metadata: managedFields (the bulk of it) and
// kubectl's last-applied-configuration annotation, which holds the whole
// object as applied, data included.
func trimMetadata(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				a = maps.Clone(a)
				delete(a, corev1.LastAppliedConfigAnnotation)
				m.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}
