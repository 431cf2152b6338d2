package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/agentauth"
	fleetv1alpha1 "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/delivery"
	"github.com/courier-dev/courier/pkg/internal/kubeproto"
	"github.com/courier-dev/courier/pkg/liveness"
	"github.com/courier-dev/courier/pkg/registry/courier/downstreamcopy"
)

// pullDelivery wires the server side of pull delivery (docs/design.md#pull-delivery): it puts
// the agent authorizer in front of the delegated one in cfg, and returns
// what the payload subresource reads. The agent authorizer only denies, so
// every request it lets through still needs the upstream RBAC's allow;
// placed first, its denials also hold for system:masters, whom the
// delegated authorizer allows without asking. An agent's own requests are
// allowed from the upstream's answer for any row, kept allowTTL
// (pkg/agentauth/allowcache.go), asked of reviewer (nil: the delegated
// authorizer).
func pullDelivery(cfg *genericapiserver.RecommendedConfig, v *views, upstreamID string, reviewer authorizer.Authorizer, allowTTL time.Duration) (apiserver.PayloadConfig, error) {
	agents := agentauth.New(v.agents, agentauth.StoreRows{Store: v.downstreamCopies})
	if reviewer == nil {
		reviewer = cfg.Authorization.Authorizer
	}
	authz, err := agentauth.WithReviewer(agents, cfg.Authorization.Authorizer, reviewer, allowTTL)
	if err != nil {
		return apiserver.PayloadConfig{}, err
	}
	cfg.Authorization.Authorizer = authz
	return apiserver.PayloadConfig{
		Sources:    downstreamcopy.ClientSources{Client: v.upstream.CoreV1()},
		Agents:     agents,
		UpstreamID: upstreamID,
		Reports:    v.reports,
		Exports:    v.exports.Guard,
		Notes:      deniedNotes{v},
	}, nil
}

// pullDelivery is pullDelivery with the agents' reviewer and allow TTL
// of o.
func (o *Options) pullDelivery(cfg *genericapiserver.RecommendedConfig, v *views, upstreamID string) (apiserver.PayloadConfig, error) {
	reviewer, err := agentReviewer(o.RecommendedOptions.Authorization, o.AgentAuthorizationQPS)
	if err != nil {
		return apiserver.PayloadConfig{}, err
	}
	return pullDelivery(cfg, v, upstreamID, reviewer, o.AgentAuthorizationCacheTTL)
}

// agentReviewer is the agents' allow cache's reviewer
// (agentauth.WithReviewer): SubjectAccessReviews sent with the delegated
// authorizer's kubeconfig and timeout through a client that may send qps
// reviews a second, burst twice that, where the delegated authorizer's
// client is fixed at 200. It keeps no answers (agentauth.Reviewer): the
// allow cache does. nil when there is no kubeconfig to review with; the
// delegated authorizer then answers.
func agentReviewer(a *genericoptions.DelegatingAuthorizationOptions, qps int) (authorizer.Authorizer, error) {
	if a == nil {
		return nil, nil
	}
	var config *rest.Config
	var err error
	if a.RemoteKubeConfigFile != "" {
		config, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: a.RemoteKubeConfigFile}, &clientcmd.ConfigOverrides{}).ClientConfig()
	} else {
		config, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of the agents' authorization reviews: %w", err)
	}
	config.QPS, config.Burst = float32(qps), 2*qps
	config.Timeout = a.ClientTimeout
	if a.CustomRoundTripperFn != nil {
		config.Wrap(a.CustomRoundTripperFn)
	}
	config.Wrap(limitInFlight(agentReviewsInFlight))
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return agentauth.Reviewer{Client: client.AuthorizationV1().SubjectAccessReviews()}, nil
}

// agentReviewsInFlight bounds the agents' reviews waiting on the upstream
// at once. When thousands of agents connect at the same moment the
// reviews are slow, and an HTTP/2 client opens a new connection, with
// its own TLS handshake, whenever its connections are at the server's
// stream limit: about 2,000 handshakes were in flight in a replica's heap
// (16 MB of key shares alone) while 10,000 agents connected at once.
// Bounded, the reviews share one connection and wait their turn here.
const agentReviewsInFlight = 100

// limitInFlight lets at most n requests through the round tripper at
// once, each until its response body is closed; the others wait for a
// slot or their context.
func limitInFlight(n int) transport.WrapperFunc {
	slots := make(chan struct{}, n)
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			select {
			case slots <- struct{}{}:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			release := sync.OnceFunc(func() { <-slots })
			resp, err := rt.RoundTrip(req)
			if err != nil || resp.Body == nil {
				release()
				return resp, err
			}
			resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
			return resp, nil
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// releasingBody gives its slot back when the body is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	defer b.release()
	return b.ReadCloser.Close()
}

// defaultAgentAuthorizationQPS lets 10,000 agents that reconnect to one
// replica be reviewed in 10 s; the upstream answered each in about 0.13 ms
// of CPU (docs/benchmarks.md), so 1,000 a second is an eighth of a core.
const defaultAgentAuthorizationQPS = 1000

// newReports sets up the store of the Clusters' status objects -- the
// agents' reports of pulled Clusters, the statuses the deliverers of pushed
// ones publish: an informer of the report ConfigMaps in namespace only,
// and a change re-overlays that Cluster's rows. A Cluster that is deleted
// or stops being pulled has its object deleted (by every replica that sees
// it; a 404 is fine), so the objects are bounded by the Clusters.
func (v *views) newReports(config *rest.Config, kube kubernetes.Interface, namespace string) error {
	v.reportInformer = clusterstatus.NewInformer(kube, namespace, informerResync)
	// Reports and digests are written with a client of their own, so that
	// they never wait behind source reads in Courier's 50/s budget, nor
	// hold them up.
	// Protobuf (kubeproto): a status object is a ConfigMap of one JSON
	// value per row, which the kube-apiserver decodes, and encodes for
	// every watcher, at each write.
	rc := kubeproto.Config(rest.CopyConfig(config))
	rc.QPS, rc.Burst = reportQPS, reportBurst
	writer, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := v.newLiveness(writer, kube, namespace); err != nil {
		return err
	}
	v.reports, err = clusterstatus.New(clusterstatus.Options{
		Namespace: namespace,
		Client:    writer.CoreV1(),
		Informer:  v.reportInformer,
		Rows:      agentauth.StoreRows{Store: v.downstreamCopies},
		OnChange:  v.relay.ReportChanged,
		// Owners whose leftover copies changed in an object get their
		// leftover rows again.
		OnLeftovers: v.relay.LeftoversChanged,
		Linger:      clusterstatus.DefaultLinger,
		Liveness:    v.liveness,
	})
	if err != nil {
		return err
	}
	clusters := v.fleetInformers.Fleet().V1alpha1().Clusters().Informer()
	_, err = clusters.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*fleetv1alpha1.Cluster)
			n, _ := obj.(*fleetv1alpha1.Cluster)
			if o != nil && n != nil && delivery.Of(o).Pulled() && !delivery.Of(n).Pulled() {
				v.forgetReport(types.NamespacedName{Namespace: n.Namespace, Name: n.Name})
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c, ok := obj.(*fleetv1alpha1.Cluster); ok {
				v.forgetReport(types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
			}
		},
	})
	return err
}

// newLiveness sets up this replica's part of the agents' liveness: its
// memory of heartbeats, written to its digests, and the informer of every
// replica's digests. A Cluster that is not pulled (any more) keeps no
// record.
func (v *views) newLiveness(writer, kube kubernetes.Interface, namespace string) error {
	host, _ := os.Hostname()
	clusters := v.fleetInformers.Fleet().V1alpha1().Clusters()
	v.livenessInformer = liveness.NewInformer(kube, namespace, informerResync)
	var err error
	v.liveness, err = liveness.New(liveness.Options{
		Namespace: namespace,
		Identity:  liveness.NewIdentity(host),
		Client:    writer.CoreV1(),
		Informer:  v.livenessInformer,
		OnChange:  v.relay.ReportChanged,
		Pulled: func(c types.NamespacedName) bool {
			if !clusters.Informer().HasSynced() {
				return true // not known yet
			}
			cl, err := clusters.Lister().Clusters(c.Namespace).Get(c.Name)
			return err == nil && delivery.Of(cl).Pulled()
		},
	})
	return err
}

// publishStatuses keeps what the engine recorded for the rows of a pushed
// Cluster it delivers to in the Cluster's status object (docs/design.md#scale-out;
// engine.Config.Publish), by row name: the rows of a Cluster
// are in its namespace; with them the Cluster's leftover copies.
func (v *views) publishStatuses(clusterKey string, rows map[string]copycontract.Status, leftovers []copycontract.Leftover) {
	ns, name := copycontract.SplitKey(clusterKey)
	entries := make(map[string]clusterstatus.Entry, len(rows))
	for key, st := range rows {
		_, row := copycontract.SplitKey(key)
		entries[row] = clusterstatus.EntryOf(st)
	}
	v.reports.Publish(types.NamespacedName{Namespace: ns, Name: name}, entries, leftovers)
}

// The report writers' own request limits (see newReports).
const (
	reportQPS   = 100
	reportBurst = 200
)

// forgetReport deletes a Cluster's report, if it has one.
func (v *views) forgetReport(c types.NamespacedName) {
	if _, ok := v.reports.Report(c); !ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := v.reports.Delete(ctx, c); err != nil {
			klog.Background().Error(err, "Deleting the agent report of a Cluster that is gone or no longer pulled failed", "cluster", c)
		}
	}()
}

// sweepReports deletes, once the caches have synced, the status objects of
// Clusters that went while no replica ran, and the agents' reports of
// Clusters that stopped being pulled meanwhile.
func (v *views) sweepReports(ctx context.Context) {
	clusters := v.fleetInformers.Fleet().V1alpha1().Clusters()
	if !cache.WaitForNamedCacheSync("agent-reports", ctx.Done(), v.reportInformer.HasSynced, clusters.Informer().HasSynced) {
		return
	}
	for _, c := range v.reports.Clusters() {
		cl, err := clusters.Lister().Clusters(c.Namespace).Get(c.Name)
		if err == nil && delivery.Of(cl).Pulled() {
			continue
		}
		r, ok := v.reports.Report(c)
		// A fresh heartbeat means the Cluster's agent was let in moments
		// ago: the Cluster is newer than this replica's cache, not gone.
		if !ok || time.Now().Before(r.Deadline()) {
			continue
		}
		// A pushed Cluster's object (no heartbeat) is its deliverer's
		// word: it goes with its Cluster only.
		if err == nil && r.Heartbeat.LastHeard.IsZero() {
			continue
		}
		if err := v.reports.Delete(ctx, c); err != nil {
			klog.FromContext(ctx).Error(err, "Deleting the agent report of a Cluster that is gone or no longer pulled failed", "cluster", c)
		}
	}
}
