package downstream

import (
	"context"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/internal/kubeproto"
)

// Clientset is the part of a clientset Courier uses in a downstream
// cluster: core/v1 (Secrets, ConfigMaps, Namespaces, ServiceAccounts) and
// authorization/v1 (access reviews). A kubernetes.Interface is one.
//
// NewClientset builds just these two groups over one HTTP client. A full
// clientset builds some fifty API groups' REST clients, codecs and rate
// limiters (about 40 KB), and Courier holds two per Cluster plus one per
// impersonated ServiceAccount: at 1,000 Clusters they were 75 MB of the
// heap (heap profile of the N=1,000 benchmark, docs/benchmarks.md).
type Clientset interface {
	CoreV1() corev1client.CoreV1Interface
	AuthorizationV1() authorizationv1client.AuthorizationV1Interface
}

var _ Clientset = kubernetes.Interface(nil)

// groupClients is a Clientset of the two groups only.
type groupClients struct {
	core  *corev1client.CoreV1Client
	authz *authorizationv1client.AuthorizationV1Client
}

func (g groupClients) CoreV1() corev1client.CoreV1Interface { return g.core }
func (g groupClients) AuthorizationV1() authorizationv1client.AuthorizationV1Interface {
	return g.authz
}

// NewClientset builds a Clientset for cfg, speaking protobuf (kubeproto):
// each copy Courier writes, and each watch event of one, is encoded and
// decoded on both sides. Every group a Clientset holds is built in, so
// every one speaks it.
func NewClientset(cfg *rest.Config) (Clientset, error) {
	cfg = kubeproto.Config(cfg)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return groupClients{core: core, authz: authz}, nil
}

// informers are a Client's watches: plain informers, each with the one
// handler it needs called from its own loop. A shared informer keeps, per
// handler, a buffer that starts at 1,024 entries (16 KiB); at four watches
// per Cluster that was 76 MB of the heap at 1,000 Clusters.
type informers struct {
	wg    sync.WaitGroup
	ctrls []toolscache.Controller
}

// watchOptions say what one informer watches and how.
type watchOptions struct {
	selector  string
	handler   toolscache.ResourceEventHandler
	transform toolscache.TransformFunc
	// indexers are added to the namespace index every informer has.
	indexers toolscache.Indexers
}

// secrets adds an informer of the Secrets o selects and returns its
// store.
func (in *informers) secrets(cs Clientset, o watchOptions) toolscache.Indexer {
	c := cs.CoreV1().Secrets(metav1.NamespaceAll)
	return in.add(selected(cs, o, c.List, c.Watch), &corev1.Secret{}, o)
}

// configMaps adds an informer of the ConfigMaps o selects and returns its
// store.
func (in *informers) configMaps(cs Clientset, o watchOptions) toolscache.Indexer {
	c := cs.CoreV1().ConfigMaps(metav1.NamespaceAll)
	return in.add(selected(cs, o, c.List, c.Watch), &corev1.ConfigMap{}, o)
}

// selected is the list-watch of one typed client's objects that o's label
// selector picks, in every namespace. As client-go's generated informers
// do, it says whether cs can stream its initial list (a fake cannot).
func selected[L runtime.Object](cs Clientset, o watchOptions, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) toolscache.ListerWatcher {
	return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = o.selector
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = o.selector
			return watchFn(ctx, opts)
		},
	}, cs)
}

func (in *informers) add(lw toolscache.ListerWatcher, obj runtime.Object, o watchOptions) toolscache.Indexer {
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	maps.Copy(indexers, o.indexers)
	store, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    obj,
		Handler:       o.handler,
		Indexers:      indexers,
		Transform:     o.transform,
	})
	in.ctrls = append(in.ctrls, ctrl)
	return store.(toolscache.Indexer)
}

// start runs every informer until stop is closed.
func (in *informers) start(stop <-chan struct{}) {
	for _, c := range in.ctrls {
		in.wg.Go(func() { c.Run(stop) })
	}
}

// synced reports whether every informer has synced.
func (in *informers) synced() bool {
	for _, c := range in.ctrls {
		if !c.HasSynced() {
			return false
		}
	}
	return true
}

// wait waits for the informers of a stopped client to return.
func (in *informers) wait() { in.wg.Wait() }
