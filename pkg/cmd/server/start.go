package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apiserver"
)

// NewCommand returns the courier-apiserver command.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "courier-apiserver",
		Short: "Copies Fleet HelmOps' downstreamResources to downstream clusters and serves their status as an aggregated API",
		Long: `courier-apiserver is a Kubernetes aggregated API server (courier.dev/v1alpha1)
with no storage of its own. It serves downstreamcopies, one row per Secret or
ConfigMap listed in a Fleet HelmOp's downstreamResources and per downstream
cluster the HelmOp targets, and fieldcopies, one row per k8s-copier style
field-copy rule on an object of a --fieldcopy-target kind, both computed from
the upstream cluster's state. With --leader-elect, every replica serves and
only the holder of the Lease writes.`,
		SilenceUsage: true,
		RunE: func(c *cobra.Command, _ []string) error {
			verflag.PrintAndExitIfRequested()
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			// Logging can be applied once per process, so not in Validate.
			if err := logsapi.ValidateAndApply(o.Logs, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	cmd.SetContext(ctx)
	fss := o.Flags()
	verflag.AddFlags(fss.FlagSet("global"))
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	return cmd
}

// Run starts the API server and the view controllers and blocks until ctx
// is done.
func (o *Options) Run(ctx context.Context) error {
	genericConfig, err := o.ServerConfig()
	if err != nil {
		return err
	}
	if genericConfig.ClientConfig == nil {
		return fmt.Errorf("no upstream cluster: set --kubeconfig or run in a cluster")
	}
	upstream := upstreamConfig(genericConfig.ClientConfig)
	upstreamID, err := o.upstreamID(ctx, upstream)
	if err != nil {
		return err
	}
	if !o.DenySensitiveExports {
		klog.Background().Info("WARNING: --deny-sensitive-exports=false: Secrets that Fleet Clusters name as kubeconfigs, Secrets holding kubeconfigs with credentials and Secrets of type "+
			"kubernetes.io/service-account-token, bootstrap.kubernetes.io/token, helm.sh/release.v1 and *.cattle.io/ types are exported "+
			"wherever a HelmOp or a Bundle lists them or a field copy names them; only sources annotated courier.dev/export: \"false\" are never exported", "flag", "deny-sensitive-exports")
	}
	views, err := newViews(upstream, upstreamID, o)
	if err != nil {
		return err
	}
	payloads, err := o.pullDelivery(genericConfig, views, upstreamID)
	if err != nil {
		return err
	}
	sums, err := newSummaries(upstream, views.downstreamCopies, o)
	if err != nil {
		return err
	}

	cfg := &apiserver.Config{
		GenericConfig: genericConfig,
		ExtraConfig: apiserver.ExtraConfig{
			DownstreamCopies: views.downstreamCopies,
			FieldCopies:      views.fieldCopies,
			Payloads:         payloads,
			Summaries:        sums.config(),
			DeliveredBy:      views.deliveredBy,
		},
	}
	server, err := cfg.Complete().New()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(genericConfig.ClientConfig)
	if err != nil {
		return err
	}
	// The server outlives ctx: on SIGTERM the engine finishes the copies
	// it is writing and the Lease is released first, then serving stops.
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	server.GenericAPIServer.AddPostStartHookOrDie("start-courier-views", func(hookCtx genericapiserver.PostStartHookContext) error {
		views.start(hookCtx.Context)
		go sums.run(hookCtx.Context)
		go func() {
			defer stopServing()
			o.runControllers(klog.NewContext(ctx, klog.Background()), kube, views)
			views.stop()
			klog.Background().Info("Controllers stopped; shutting the API server down")
		}()
		return nil
	})
	if err := server.GenericAPIServer.AddReadyzChecks(healthz.NamedCheck("courier-views-synced", func(*http.Request) error {
		if !views.controller.Ready() {
			return fmt.Errorf("informers have not synced yet")
		}
		if !sums.summarizer.HasSynced() {
			return fmt.Errorf("downstreamcopysummaries have not been computed yet")
		}
		return fieldCopiesReady(views.fieldCopy)
	}), frontProxyReadyCheck(genericConfig.Authentication.RequestHeaderConfig)); err != nil {
		return err
	}
	return server.GenericAPIServer.PrepareRun().RunWithContext(serveCtx)
}

// Courier's own requests to the upstream kube-apiserver (source reads,
// kubeconfig Secrets, Events, leader election) are limited like
// kube-controller-manager's (--kube-api-qps 50, --kube-api-burst 100).
// client-go's default of 5 per second made a new HelmOp at 1,000 Clusters
// wait 232 s of its 238 s on 1,160 source reads (docs/benchmarks.md).
const (
	upstreamQPS   = 50
	upstreamBurst = 100
)

// upstreamConfig is the generic server's client config with Courier's
// request limits, unless the kubeconfig set its own.
func upstreamConfig(c *rest.Config) *rest.Config {
	out := rest.CopyConfig(c)
	if out.QPS == 0 {
		out.QPS = upstreamQPS
	}
	if out.Burst == 0 {
		out.Burst = upstreamBurst
	}
	return out
}
