// Package server holds courier-apiserver's command line: flags and
// options, and the wiring from them to a running process: the informers,
// the export rule, the downstream clients, the copy engine, the view
// controller and the field copies (wiring.go); the summaries of the rows
// (summaries.go); pull delivery's agent
// reports and payloads (agents.go); leader election, which switches the
// writers on and off (leader.go); and the API server, which stops serving
// only after the engine has stopped and the Lease is released (start.go).
package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	basecompatibility "k8s.io/component-base/compatibility"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	baseversion "k8s.io/component-base/version"
	netutils "k8s.io/utils/net"

	"github.com/courier-dev/courier/pkg/agentauth"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	fleetv1alpha1 "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/copysummary"
	"github.com/courier-dev/courier/pkg/engine"
	courieropenapi "github.com/courier-dev/courier/pkg/generated/openapi"
	"github.com/courier-dev/courier/pkg/leaderelect"
	"github.com/courier-dev/courier/pkg/watchsetup"
)

func init() {
	// Logging options (--logging-format, contextual logging) are gated by
	// features that must be known to the gate before flags are validated.
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
	// Off unless --feature-gates=WatchListCompression=true. Since 1.37 the
	// generic server gzips a watch-list's stream flush by flush, every
	// later event included, for clients that accept gzip (client-go's
	// reflector does). Courier's watch-lists are agents' (each of its own
	// Cluster's few rows) and kubectl wait's: small initial lists, then one
	// event per change, each then its own gzip stream. Profiled at 10,000
	// agents (docs/benchmarks.md), compressing was 16 % of a replica's CPU
	// for a source change and decompressing most of the agents'. Lists
	// keep their compression (APIResponseCompression).
	// At the Kubernetes version Courier's generic server emulates (set by
	// the ComponentGlobalsRegistry once flags are parsed): before that the
	// gate's version is Courier's own, at which the feature does not exist.
	utilruntime.Must(utilfeature.DefaultMutableFeatureGate.OverrideDefaultAtVersion(features.WatchListCompression, false,
		version.MustParse(baseversion.DefaultKubeBinaryVersion)))
	// On unless --feature-gates=APIServingWithRoutine=false, or an audit
	// policy is set (see servingWithRoutine). A watch's goroutine is
	// parked, for the watch's whole life, under every filter of the
	// generic server's chain: 15 KiB of frames, so its stack is 32 KiB,
	// the largest part of what each of 10,000 agents' watches costs
	// (docs/benchmarks.md). With the gate, the filters run in a goroutine
	// of their own that ends once the watch is set up, and the watch is
	// served from the request's goroutine at a few KiB: 16 KiB of stack
	// per watch. Kubernetes keeps the gate off by default because of what
	// it changes in logs and audit records of watches (kubernetes#125614,
	// #126466), not because of how watches are served.
	utilruntime.Must(utilfeature.DefaultMutableFeatureGate.OverrideDefaultAtVersion(features.APIServingWithRoutine, true,
		version.MustParse(baseversion.DefaultKubeBinaryVersion)))
}

// Options are everything Courier's command line sets.
type Options struct {
	// RecommendedOptions are the generic API server's, without etcd (the
	// views are computed, never stored) and without admission (the API is
	// read-only, and admission only runs for writes).
	RecommendedOptions       *genericoptions.RecommendedOptions
	ComponentGlobalsRegistry basecompatibility.ComponentGlobalsRegistry
	Logs                     *logs.Options

	// AlternateDNS are extra names for the self-signed serving certificate
	// made when no --tls-cert-file is given.
	AlternateDNS []string
	// FieldCopy are the k8s-copier flags (fieldcopy.go).
	FieldCopy FieldCopyOptions

	// UpstreamID identifies the upstream cluster on every copy (owner label,
	// courier.dev/upstream). Empty means the UID of the upstream's
	// kube-system namespace, which is stable for the cluster's lifetime.
	UpstreamID string
	// CopyWorkers is how many downstream clusters are reconciled at once.
	CopyWorkers int
	// SummaryWindow is the most often a downstreamcopysummary is
	// recomputed (pkg/copysummary): once per window.
	SummaryWindow time.Duration
	// ShutdownWatchTerminationGracePeriod is how long, on SIGTERM, the
	// server waits for the watches it serves to end once it has told them
	// to (the generic server's option of the same name).
	ShutdownWatchTerminationGracePeriod time.Duration
	// AgentNamespace is where ServiceAccounts are looked up downstream.
	AgentNamespace string
	// RequireServiceAccount refuses to copy for a HelmOp with no
	// ServiceAccount (no fallback to Courier's own identity).
	RequireServiceAccount bool
	// DenySensitiveExports is the export deny list (docs/design.md#export-safety):
	// Secrets that Clusters name as kubeconfigs and Secrets of credential
	// and controller-state types are never exported. On by default; an
	// operator who must export such a Secret on purpose turns it off
	// (the courier.dev/export annotation still holds then).
	DenySensitiveExports bool
	// AgentReportNamespace holds the courier-agents' reports, one
	// ConfigMap per pulled Cluster (pkg/clusterstatus): Courier's own
	// namespace, where a Role lets it write ConfigMaps.
	AgentReportNamespace string
	// AgentAuthorizationCacheTTL is how long an agent's allowed answer
	// from the upstream is kept (pkg/agentauth/allowcache.go); zero asks
	// the upstream about every request the delegated cache misses.
	AgentAuthorizationCacheTTL time.Duration
	// AgentAuthorizationQPS is how many of those questions a second
	// Courier may ask the upstream (burst twice that): one per agent
	// that reconnects to a replica which has not answered it yet.
	AgentAuthorizationQPS int
	// LeaderElection decides which replica writes: all serve the API and
	// observe, the holder of the Lease writes.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// MaxWatchSetupsInflight bounds the watch requests being set up at
	// once (pkg/watchsetup); 0 leaves them unbounded.
	MaxWatchSetupsInflight int
	// Shards shares delivery among every replica (sharding.go); the
	// leader keeps what stays single-owner: field copies and the view's
	// Warning Events.
	Shards ShardOptions

	StdOut io.Writer
	StdErr io.Writer
}

// NewOptions returns Options with Courier's defaults.
func NewOptions(out, errOut io.Writer) *Options {
	ro := genericoptions.NewRecommendedOptions("", apiserver.Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion))
	ro.Etcd = nil
	ro.Admission = nil
	// The kube-apiserver applies priority and fairness before it proxies a
	// request to an aggregated server; doing it again here would only need
	// more RBAC.
	ro.Features.EnablePriorityAndFairness = false
	ro.SecureServing.BindPort = 8443
	return &Options{
		RecommendedOptions:                  ro,
		ComponentGlobalsRegistry:            newComponentGlobalsRegistry(),
		Logs:                                logs.NewOptions(),
		AlternateDNS:                        []string{"courier-api.courier-system.svc"},
		CopyWorkers:                         engine.DefaultWorkers,
		SummaryWindow:                       copysummary.DefaultWindow,
		ShutdownWatchTerminationGracePeriod: defaultWatchTermination,
		AgentNamespace:                      fleetv1alpha1.SystemNamespace,
		AgentReportNamespace:                "courier-system",
		DenySensitiveExports:                true,
		AgentAuthorizationCacheTTL:          agentauth.DefaultAllowCacheTTL,
		AgentAuthorizationQPS:               defaultAgentAuthorizationQPS,
		MaxWatchSetupsInflight:              defaultMaxWatchSetupsInflight,
		LeaderElection:                      defaultLeaderElection(),
		Shards:                              defaultShardOptions(),
		StdOut:                              out,
		StdErr:                              errOut,
	}
}

// Flags returns the command's flags in named sets, as Kubernetes components
// print them.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.RecommendedOptions.AddFlags(fss.FlagSet("generic"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	o.ComponentGlobalsRegistry.AddFlags(fss.FlagSet("generic"))
	fss.FlagSet("generic").DurationVar(&o.ShutdownWatchTerminationGracePeriod, "shutdown-watch-termination-grace-period", o.ShutdownWatchTerminationGracePeriod,
		"On SIGTERM every watch this server serves is ended; with APIServingWithRoutine off (or an audit policy) the server also waits at most this long for them to drain. 0 holds shutdown for its 60s timeout.")
	fss.FlagSet("generic").IntVar(&o.MaxWatchSetupsInflight, "max-watch-setups-inflight", o.MaxWatchSetupsInflight,
		"Watch requests set up at once, from arrival until their watcher is registered; others wait up to 15s, then get 429 with Retry-After. 0: no bound. Ignored with --enable-priority-and-fairness.")
	fss.FlagSet("generic").StringSliceVar(&o.AlternateDNS, "alternate-dns", o.AlternateDNS,
		"Extra DNS names for the self-signed serving certificate made when --tls-cert-file is not given.")
	o.FieldCopy.addFlags(fss.FlagSet("fieldcopy"))
	courier := fss.FlagSet("courier")
	courier.StringVar(&o.UpstreamID, "upstream-id", o.UpstreamID,
		"Identifies the upstream cluster in the owner label and courier.dev/upstream annotation of every copy. Default: the UID of the upstream's kube-system namespace.")
	courier.StringVar(&o.AgentNamespace, "agent-namespace", o.AgentNamespace,
		"Namespace of downstream clusters where HelmOps' ServiceAccounts (and the fallback ServiceAccount fleet-default) are looked up; copies are written as those ServiceAccounts.")
	courier.StringVar(&o.AgentReportNamespace, "agent-report-namespace", o.AgentReportNamespace,
		"Upstream namespace (Courier's own) where each Cluster's status object is kept: ConfigMaps courier-agent-report.<namespace>.<cluster>, labelled courier.dev/agent-report=true.")
	courier.BoolVar(&o.RequireServiceAccount, "require-service-account", o.RequireServiceAccount,
		"Refuse to copy for a HelmOp that names no ServiceAccount when fleet-default does not exist in the agent namespace, instead of writing with Courier's own identity.")
	courier.BoolVar(&o.DenySensitiveExports, "deny-sensitive-exports", o.DenySensitiveExports,
		"Never export Secrets that hold credentials or another controller's state (Clusters' kubeconfigs, kubeconfigs with credentials, tokens, Helm releases, *.cattle.io types), whatever a HelmOp, Bundle or field copy names: their rows are Denied or Refused. Sources annotated courier.dev/export: \"false\" are never exported either way.")
	courier.DurationVar(&o.AgentAuthorizationCacheTTL, "agent-authorization-cache-ttl", o.AgentAuthorizationCacheTTL,
		"How long the upstream's allow for a courier-agent's requests to its own Cluster's rows is kept, asked once per agent, verb and subresource. 0 asks for every request.")
	courier.IntVar(&o.AgentAuthorizationQPS, "agent-authorization-qps", o.AgentAuthorizationQPS,
		"SubjectAccessReviews a second (burst twice that) for courier-agents' allows, on a client of their own beside the delegated authorizer's 200.")
	courier.IntVar(&o.CopyWorkers, "copy-workers", o.CopyWorkers,
		"How many downstream clusters are reconciled at once; a slow or unreachable cluster holds one worker at most for the downstream request timeout.")
	courier.DurationVar(&o.SummaryWindow, "summary-window", o.SummaryWindow,
		"A downstreamcopysummary is recomputed at most once per window while someone watches summaries on this replica; otherwise once per 5s, and every read catches up first.")
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, fss.FlagSet("leader election"))
	o.Shards.addFlags(fss.FlagSet("sharded delivery"))
	return fss
}

// defaultWatchTermination bounds how long a SIGTERM waits for the watches
// it ended to drain: they end at once, so this is only the margin for
// their last writes.
const defaultWatchTermination = 5 * time.Second

// newComponentGlobalsRegistry returns a registry whose "kube" component is
// the Kubernetes libraries Courier is built with. The default registry
// derives it from the binary's version, which for Courier is Courier's own
// (v0.x) and not a Kubernetes version the generic server can emulate.
func newComponentGlobalsRegistry() basecompatibility.ComponentGlobalsRegistry {
	r := basecompatibility.NewComponentGlobalsRegistry()
	_, _ = r.ComponentGlobalsOrRegister(basecompatibility.DefaultKubeComponent,
		basecompatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", ""),
		utilfeature.DefaultMutableFeatureGate)
	return r
}

// Complete fills in what depends on parsed flags.
func (o *Options) Complete() error {
	if err := o.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	return o.servingWithRoutine()
}

// servingWithRoutine turns APIServingWithRoutine off when an audit policy
// is set and --feature-gates does not name the gate: with the gate, the
// audit filter sees a watch's handler return once the watch is set up,
// and records the watch as ended then, with a made-up status
// (kubernetes#126466). An operator who audits gets correct records and
// pays the 16 KiB more per watch; one who names the gate gets what they
// named.
func (o *Options) servingWithRoutine() error {
	gate := utilfeature.DefaultMutableFeatureGate
	if o.RecommendedOptions.Audit == nil || o.RecommendedOptions.Audit.PolicyFile == "" ||
		gate.ExplicitlySet(features.APIServingWithRoutine) || !gate.Enabled(features.APIServingWithRoutine) {
		return nil
	}
	return gate.SetFromMap(map[string]bool{string(features.APIServingWithRoutine): false})
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.RecommendedOptions.Validate()...)
	errs = append(errs, o.ComponentGlobalsRegistry.Validate()...)
	errs = append(errs, o.FieldCopy.validate()...)
	if o.AgentReportNamespace == "" {
		errs = append(errs, fmt.Errorf("--agent-report-namespace must name a namespace"))
	}
	if o.CopyWorkers < 1 {
		errs = append(errs, fmt.Errorf("--copy-workers must be at least 1, got %d", o.CopyWorkers))
	}
	if o.ShutdownWatchTerminationGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-watch-termination-grace-period must not be negative, got %s", o.ShutdownWatchTerminationGracePeriod))
	}
	if o.AgentAuthorizationCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("--agent-authorization-cache-ttl must not be negative, got %s", o.AgentAuthorizationCacheTTL))
	}
	if o.AgentAuthorizationQPS < 1 {
		errs = append(errs, fmt.Errorf("--agent-authorization-qps must be at least 1, got %d", o.AgentAuthorizationQPS))
	}
	if o.MaxWatchSetupsInflight < 0 {
		errs = append(errs, fmt.Errorf("--max-watch-setups-inflight must not be negative, got %d", o.MaxWatchSetupsInflight))
	}
	if o.SummaryWindow <= 0 {
		errs = append(errs, fmt.Errorf("--summary-window must be positive, got %s", o.SummaryWindow))
	}
	errs = append(errs, leaderelect.Validate(o.LeaderElection)...)
	errs = append(errs, o.Shards.validate(o.LeaderElection.ResourceNamespace)...)
	errs = append(errs, logsapi.Validate(o.Logs, utilfeature.DefaultFeatureGate, nil).ToAggregate())
	return utilerrors.NewAggregate(errs)
}

// ServerConfig builds the generic API server configuration.
func (o *Options) ServerConfig() (*genericapiserver.RecommendedConfig, error) {
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts(
		"localhost", o.AlternateDNS, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}
	cfg := genericapiserver.NewRecommendedConfig(apiserver.Codecs)

	namer := openapi.NewDefinitionNamer(apiserver.Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(courieropenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "Courier"
	cfg.OpenAPIConfig.Info.Version = "v1alpha1"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(courieropenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "Courier"
	cfg.OpenAPIV3Config.Info.Version = "v1alpha1"

	cfg.FeatureGate = o.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	cfg.EffectiveVersion = o.ComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent)

	if err := o.RecommendedOptions.ApplyTo(cfg); err != nil {
		return nil, err
	}
	// Without it, a watch through the aggregator (every courier-agent holds
	// one) keeps its HTTP/2 stream open after SIGTERM, and the server's
	// shutdown waits for the stream until its 60 s timeout: a rolling
	// update stalled, and the agents were not told to move on.
	cfg.ShutdownWatchTerminationGracePeriod = o.ShutdownWatchTerminationGracePeriod
	cfg.BuildHandlerChainFunc = handlerChain(o.MaxWatchSetupsInflight, cfg.FlowControl != nil)
	return cfg, nil
}

// defaultMaxWatchSetupsInflight keeps the agents' reviews (at most 100 in
// flight, agentReviewsInFlight) busy with as many setups waiting behind
// them, a few MiB of setups at once.
const defaultMaxWatchSetupsInflight = 200

// handlerChain is the generic server's handler chain with watch setups
// bounded outside all of it (pkg/watchsetup), unless priority and
// fairness, which bounds them itself, is on.
func handlerChain(maxWatchSetups int, priorityAndFairness bool) func(http.Handler, *genericapiserver.Config) http.Handler {
	if priorityAndFairness {
		maxWatchSetups = 0
	}
	return func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return watchsetup.Limit(genericapiserver.DefaultBuildHandlerChain(h, c), maxWatchSetups, c.RequestInfoResolver, c.Serializer)
	}
}
