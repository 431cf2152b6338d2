// Package agent is courier-agent (docs/design.md#pull-delivery): it runs in a downstream
// cluster, reads the rows of its own Fleet Cluster and their payloads from
// Courier, writes the copies into its cluster with the copy engine push
// uses (pkg/engine), and reports each row's outcome back.
//
// The engine is given one Cluster (synthesized: the agent has no access to
// Fleet's Clusters), one downstream client (the local cluster, built by
// pkg/downstream from a rest.Config), the agent's rows (package rows) and a
// source reader that reads payloads (package payload); its status changes
// go to the reporter (package report). Config → Complete → New → Run.
//
// Data flows one way: rows → engine → report.Pending → Reporter →
// Courier. Each part is built with what it sends to: the local client with
// the engine's CopyEvents sink, the engine with the Pending set, the
// Reporter with the engine (whose statuses it reads) and the same set.
package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/agent/payload"
	"github.com/courier-dev/courier/pkg/agent/report"
	"github.com/courier-dev/courier/pkg/agent/retry"
	"github.com/courier-dev/courier/pkg/agent/rows"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
	"github.com/courier-dev/courier/pkg/engine"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
)

// Config is what an Agent needs.
type Config struct {
	// Cluster is the agent's Fleet Cluster upstream.
	Cluster types.NamespacedName
	// Upstream reaches the management cluster as the agent's identity: the
	// user its Cluster's agent annotation names (docs/design.md#pull-delivery).
	Upstream *rest.Config
	// Local reaches the cluster the agent writes into.
	Local *rest.Config
	// AgentNamespace is where ServiceAccounts are looked up locally.
	AgentNamespace string
	// RequireServiceAccount refuses to write with the agent's own identity.
	RequireServiceAccount bool
	// ReportInterval is the heartbeat: every row is reported at least this
	// often.
	ReportInterval time.Duration
	// UpstreamID is the upstream cluster's id in the copies' owner labels;
	// empty means learned from the first payload read.
	UpstreamID string
	// Workers is the engine's; one cluster needs one.
	Workers int
	// InitialJitter spreads the first connections of agents started
	// together: Run waits a random part of it before its first request.
	InitialJitter time.Duration
	// Backoff paces the requests upstream after a failure: at least the
	// answer's Retry-After plus jitter, or exponentially with jitter
	// (package retry). Zero means retry.DefaultBackoff.
	Backoff retry.Backoff
}

// completedConfig is a Config with defaults and clients.
type completedConfig struct {
	Config
	// watch lists and watches the rows; requests reads payloads and sends
	// reports, each bounded by requestTimeout so that an unreachable
	// management cluster holds neither the engine nor a shutdown.
	watch, requests versioned.Interface
}

// requestTimeout bounds each payload read and status report.
const requestTimeout = 10 * time.Second

// CompletedConfig is the result of Complete.
type CompletedConfig struct{ *completedConfig }

// Complete fills in defaults and builds the upstream client.
func (c Config) Complete() (CompletedConfig, error) {
	if c.Cluster.Namespace == "" || c.Cluster.Name == "" {
		return CompletedConfig{}, errors.New("the agent's Cluster needs a namespace and a name")
	}
	if c.Upstream == nil || c.Local == nil {
		return CompletedConfig{}, errors.New("the agent needs an upstream and a local cluster")
	}
	if c.AgentNamespace == "" {
		c.AgentNamespace = fleet.SystemNamespace
	}
	if c.ReportInterval <= 0 {
		c.ReportInterval = 30 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Backoff == (retry.Backoff{}) {
		c.Backoff = retry.DefaultBackoff
	}
	up := rest.CopyConfig(c.Upstream)
	if up.UserAgent == "" {
		up.UserAgent = "courier-agent"
	}
	// One Gate for every request upstream (the watch, payloads, reports):
	// a Retry-After holds them all back.
	up.Wrap(retry.NewGate(c.Backoff).Wrap)
	watch, err := versioned.NewForConfig(up)
	if err != nil {
		return CompletedConfig{}, err
	}
	bounded := rest.CopyConfig(up)
	bounded.Timeout = requestTimeout
	requests, err := versioned.NewForConfig(bounded)
	if err != nil {
		return CompletedConfig{}, err
	}
	return CompletedConfig{&completedConfig{Config: c, watch: watch, requests: requests}}, nil
}

// Agent pulls its Cluster's copies.
type Agent struct {
	cfg    *completedConfig
	rows   *rows.Controller
	reader *payload.Reader
	// ready is set once the engine has been given every row.
	ready atomic.Bool
}

// The engine is what the rows are handed to and what the reporter reads.
var (
	_ rows.Desired    = (*engine.Engine)(nil)
	_ rows.Desired    = readyAfter{}
	_ report.Statuses = (*engine.Engine)(nil)
)

// New returns an Agent; Run starts it.
func (c CompletedConfig) New() (*Agent, error) {
	rc, err := rows.New(c.watch, c.Cluster.Namespace, c.Cluster.Name, c.AgentNamespace)
	if err != nil {
		return nil, err
	}
	return &Agent{
		cfg:    c.completedConfig,
		rows:   rc,
		reader: payload.NewReader(c.requests.CourierV1alpha1().RESTClient()),
	}, nil
}

// Ready reports whether the agent has listed its rows and handed them to
// the engine (its readiness probe).
func (a *Agent) Ready() bool { return a.ready.Load() }

// Run pulls until ctx is done. The engine's copies carry the upstream id in
// their owner labels, and the local watch selects by it: so the engine is
// built only once the id is known (--upstream-id, or the first payload);
// until then nothing is written and nothing is removed.
func (a *Agent) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if !a.spread(ctx) {
		return ctx.Err()
	}
	a.rows.Start(ctx)
	if !a.rows.WaitForSync(ctx) {
		return ctx.Err()
	}
	logger.Info("Listed the Cluster's rows", "cluster", a.cfg.Cluster.String(), "rows", len(a.rows.Keys()))
	upstreamID, err := a.upstreamID(ctx)
	if err != nil {
		return err
	}
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.Cluster.Namespace, Name: a.cfg.Cluster.Name}}
	clusters := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := clusters.Add(cluster); err != nil {
		return err
	}
	// The local client's informers start at once and tell the engine of
	// every change to the copies (drift); the engine reads the copies
	// through that client. The client reports to a sink the engine binds
	// to when it is built (changes before then are kept, see CopyEvents).
	copyEvents := &engine.CopyEvents{}
	local, err := downstream.NewClient(cluster, a.cfg.Local, downstream.Options{
		WatchSelector: func(c *fleet.Cluster) labels.Selector {
			return copyspec.ClusterSelector(upstreamID, c.Namespace, c.Name)
		},
		ForeignSelector: copyspec.FleetCopySelector(),
		OnChange:        copyEvents.CopyChanged,
		UserAgent:       "courier-agent",
	})
	if err != nil {
		return fmt.Errorf("the local cluster: %w", err)
	}
	defer local.Stop()
	// The engine marks the rows whose status changed in pending; the
	// reporter, built after the engine, sends them with the engine's
	// statuses.
	pending := report.NewPending()
	eng := engine.New(engine.Config{
		UpstreamID:            upstreamID,
		Sources:               a.reader,
		Clusters:              fleetlisters.NewClusterLister(clusters),
		Downstream:            localCluster{client: local},
		CopyEvents:            copyEvents,
		OnStatusChange:        pending.Changed,
		Workers:               a.cfg.Workers,
		AgentNamespace:        a.cfg.AgentNamespace,
		RequireServiceAccount: a.cfg.RequireServiceAccount,
	})
	reporter := report.New(a.cfg.requests.CourierV1alpha1(), a.cfg.ReportInterval, a.rows, eng, pending)
	// The local copies are listed first, so that a restart finds the
	// current ones in the cache and writes nothing.
	if !cache.WaitForCacheSync(ctx.Done(), local.HasSynced) {
		return ctx.Err()
	}
	engineDone := make(chan struct{})
	go func() {
		defer close(engineDone)
		eng.Run(klog.NewContext(ctx, logger.WithName("engine")))
	}()
	go reporter.Run(klog.NewContext(ctx, logger.WithName("report")))
	go func() {
		// Run hands every HelmOp over before DesiredComplete.
		a.rows.Run(ctx, readyAfter{eng, &a.ready})
	}()
	logger.Info("Pulling copies", "cluster", a.cfg.Cluster.String(), "upstream", upstreamID, "agentNamespace", a.cfg.AgentNamespace)
	<-engineDone
	logger.Info("Copy engine stopped")
	return nil
}

// spread waits a random part of InitialJitter before the agent's first
// request upstream, so that agents started in the same instant do not all
// list in it. It reports false if ctx ended first.
func (a *Agent) spread(ctx context.Context) bool {
	d := retry.InitialDelay(a.cfg.InitialJitter, rand.Float64())
	if d <= 0 {
		return true
	}
	klog.FromContext(ctx).V(2).Info("Waiting before the first request upstream (--initial-jitter)", "wait", d)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// upstreamID returns --upstream-id, or the courier.dev/upstream of the
// first payload the agent can read. With no row to read it waits: nothing
// is written or swept meanwhile.
func (a *Agent) upstreamID(ctx context.Context) (string, error) {
	if a.cfg.UpstreamID != "" {
		return a.cfg.UpstreamID, nil
	}
	logger := klog.FromContext(ctx)
	logged := false
	for {
		for _, key := range a.rows.Copyable() {
			r, ok := a.rows.Row(key)
			if !ok {
				continue
			}
			src := engine.Source{Kind: r.Spec.Source.Kind, Namespace: r.Namespace, Name: r.Spec.Source.Name, Row: key}
			if _, err := a.reader.Read(ctx, src); err != nil {
				logger.V(2).Info("Reading a payload for the upstream id failed", "row", key, "err", err)
				continue
			}
			if id := a.reader.Upstream(); id != "" {
				logger.Info("Learned the upstream id from a payload", "upstream", id, "row", key)
				return id, nil
			}
		}
		if !logged {
			logger.Info("Waiting for a row with a payload to learn the upstream id from (or set --upstream-id); nothing is written or removed meanwhile")
			logged = true
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-a.rows.Changed():
		case <-time.After(10 * time.Second):
		}
	}
}

// localCluster is the engine's Downstream: the one local client whatever
// the Cluster.
type localCluster struct{ client *downstream.Client }

var _ engine.Downstream = localCluster{}

// Get implements engine.Downstream.
func (l localCluster) Get(context.Context, *fleet.Cluster) (*downstream.Client, error) {
	return l.client, nil
}

// Forget implements engine.Downstream; it is never needed, as the one
// Cluster is never gone.
func (l localCluster) Forget(string) {}

// readyAfter marks the agent ready once the engine has every row.
type readyAfter struct {
	*engine.Engine
	ready *atomic.Bool
}

func (r readyAfter) DesiredComplete() {
	r.Engine.DesiredComplete()
	r.ready.Store(true)
}
