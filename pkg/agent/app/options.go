// Package app is courier-agent's command line: flags, options, leader
// election, and the /healthz and /metrics endpoints around package agent.
package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/courier-dev/courier/pkg/agent"
	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/downstream"
	"github.com/courier-dev/courier/pkg/leaderelect"
)

// featureGate gates the agent's logging options (--logging-format,
// contextual logging). It is the agent's own, at its defaults: the API
// server library's global gate would link an API server into the agent
// (pkg/importrules).
var featureGate = featuregate.NewFeatureGate()

func init() {
	// The logging features must be known to the gate before flags are
	// validated.
	utilruntime.Must(logsapi.AddFeatureGates(featureGate))
}

// Options are everything courier-agent's command line sets (docs/design.md#pull-delivery).
type Options struct {
	// Cluster is "<namespace>/<name>" of the agent's Fleet Cluster upstream.
	Cluster string
	// UpstreamKubeconfig reaches the management cluster as the agent's
	// identity.
	UpstreamKubeconfig string
	// Kubeconfig reaches the local cluster; empty means in-cluster.
	Kubeconfig            string
	AgentNamespace        string
	RequireServiceAccount bool
	ReportInterval        time.Duration
	// InitialJitter spreads the first connections of agents started
	// together over this window.
	InitialJitter          time.Duration
	UpstreamID             string
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// LeaderElection elects one writer among the agent's replicas with a
	// Lease in the local cluster (by default in the agent namespace).
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	Logs           *logs.Options
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	le := componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:  true,
		ResourceLock: resourcelock.LeasesResourceLock,
		ResourceName: "courier-agent",
	}
	le.LeaseDuration.Duration = 15 * time.Second
	le.RenewDeadline.Duration = 10 * time.Second
	le.RetryPeriod.Duration = 2 * time.Second
	return &Options{
		AgentNamespace:         fleet.SystemNamespace,
		ReportInterval:         30 * time.Second,
		InitialJitter:          5 * time.Second,
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		LeaderElection:         le,
		Logs:                   logs.NewOptions(),
	}
}

// Flags returns the flags in named sets, as Kubernetes components print
// them.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("agent")
	fs.StringVar(&o.Cluster, "cluster", o.Cluster, "The agent's Fleet Cluster in the management cluster, as <namespace>/<name>. Required.")
	fs.StringVar(&o.UpstreamKubeconfig, "upstream-kubeconfig", o.UpstreamKubeconfig,
		"Kubeconfig of the management cluster, as the agent's identity (the user its Cluster's "+courier.AnnotationAgentUser+" annotation names). Required.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the cluster the agent writes copies into. Default: in-cluster configuration.")
	fs.StringVar(&o.AgentNamespace, "agent-namespace", o.AgentNamespace,
		"Namespace of this cluster where HelmOps' ServiceAccounts (and the fallback fleet-default) are looked up; copies are written as those ServiceAccounts.")
	fs.BoolVar(&o.RequireServiceAccount, "require-service-account", o.RequireServiceAccount,
		"Refuse to copy for a HelmOp that names no ServiceAccount when fleet-default does not exist in the agent namespace, instead of writing with the agent's own identity.")
	fs.DurationVar(&o.ReportInterval, "report-interval", o.ReportInterval,
		"Report every row's status at least this often (the agent's heartbeat); Courier shows the rows Unreachable after three intervals without a report.")
	fs.DurationVar(&o.InitialJitter, "initial-jitter", o.InitialJitter,
		"Wait a random time up to this long before the first request to the management cluster, so that agents started together spread their first connections; 0 turns it off.")
	fs.StringVar(&o.UpstreamID, "upstream-id", o.UpstreamID,
		"Id of the management cluster in the copies' owner labels. Default: learned from the first payload (the courier.dev/upstream Courier writes).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address to serve /metrics on; 0 turns it off.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address to serve /healthz and /readyz on; 0 turns it off.")
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, fss.FlagSet("leader election"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	return fss
}

// cluster parses --cluster.
func (o *Options) cluster() (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(o.Cluster, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--cluster must be <namespace>/<name>, got %q", o.Cluster)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// Complete fills in what depends on other flags: the Lease's namespace
// defaults to the agent namespace.
func (o *Options) Complete() {
	if o.LeaderElection.ResourceNamespace == "" {
		o.LeaderElection.ResourceNamespace = o.AgentNamespace
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if _, err := o.cluster(); err != nil {
		errs = append(errs, err)
	}
	if o.UpstreamKubeconfig == "" {
		errs = append(errs, errors.New("--upstream-kubeconfig is required"))
	}
	if o.AgentNamespace == "" {
		errs = append(errs, errors.New("--agent-namespace must not be empty"))
	}
	if o.ReportInterval < time.Second {
		errs = append(errs, fmt.Errorf("--report-interval must be at least 1s, got %s", o.ReportInterval))
	}
	if o.InitialJitter < 0 {
		errs = append(errs, fmt.Errorf("--initial-jitter must not be negative, got %s", o.InitialJitter))
	}
	errs = append(errs, leaderelect.Validate(o.LeaderElection)...)
	errs = append(errs, logsapi.Validate(o.Logs, featureGate, nil).ToAggregate())
	return utilerrors.NewAggregate(errs)
}

// Config turns the options into the agent's Config.
func (o *Options) Config() (agent.Config, error) {
	cluster, err := o.cluster()
	if err != nil {
		return agent.Config{}, err
	}
	upstream, err := clientcmd.BuildConfigFromFlags("", o.UpstreamKubeconfig)
	if err != nil {
		return agent.Config{}, fmt.Errorf("--upstream-kubeconfig: %w", err)
	}
	var local *rest.Config
	if o.Kubeconfig == "" {
		local, err = rest.InClusterConfig()
	} else {
		local, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	}
	if err != nil {
		return agent.Config{}, fmt.Errorf("the local cluster (--kubeconfig): %w", err)
	}
	if local.QPS == 0 {
		// The limit Courier keeps per downstream cluster (client-go's 5/10
		// would make a first pass wait on its bucket).
		local.QPS, local.Burst = downstream.QPS, downstream.Burst
	}
	return agent.Config{
		Cluster:               cluster,
		Upstream:              upstream,
		Local:                 local,
		AgentNamespace:        o.AgentNamespace,
		RequireServiceAccount: o.RequireServiceAccount,
		ReportInterval:        o.ReportInterval,
		InitialJitter:         o.InitialJitter,
		UpstreamID:            o.UpstreamID,
	}, nil
}
