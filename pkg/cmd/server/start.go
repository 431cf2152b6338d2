package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/copyview"
	fleetclient "github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	fleetinformers "github.com/courier-dev/courier/pkg/generated/informers/externalversions"
	"github.com/courier-dev/courier/pkg/registry/memstore"
)

// informerResync is long: the views react to watch events, and a resync only
// re-delivers what the caches already hold.
const informerResync = 10 * time.Hour

// NewCommand returns the courier-apiserver command.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "courier-apiserver",
		Short: "Copies Fleet HelmOps' downstreamResources to downstream clusters and serves their status as an aggregated API",
		Long: `courier-apiserver is a Kubernetes aggregated API server (courier.dev/v1alpha1)
with no storage of its own. It serves downstreamcopies, one row per Secret or
ConfigMap listed in a Fleet HelmOp's downstreamResources and per downstream
cluster the HelmOp targets, computed from the upstream cluster's state.`,
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
	views, err := newViews(genericConfig.ClientConfig)
	if err != nil {
		return err
	}

	cfg := &apiserver.Config{
		GenericConfig: genericConfig,
		ExtraConfig: apiserver.ExtraConfig{
			DownstreamCopies: views.downstreamCopies,
			FieldCopies:      views.fieldCopies,
		},
	}
	server, err := cfg.Complete().New()
	if err != nil {
		return err
	}
	server.GenericAPIServer.AddPostStartHookOrDie("start-courier-views", func(hookCtx genericapiserver.PostStartHookContext) error {
		views.start(hookCtx.Context)
		return nil
	})
	if err := server.GenericAPIServer.AddReadyzChecks(healthz.NamedCheck("courier-views-synced", func(*http.Request) error {
		if !views.controller.Ready() {
			return fmt.Errorf("informers have not synced yet")
		}
		return nil
	})); err != nil {
		return err
	}
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

// views are the informers and controllers that fill the view stores.
type views struct {
	fleetInformers    fleetinformers.SharedInformerFactory
	metadataInformers metadatainformer.SharedInformerFactory
	controller        *copyview.Controller
	downstreamCopies  *memstore.Store[*courier.DownstreamCopy]
	fieldCopies       *memstore.Store[*courier.FieldCopy]
}

func newViews(config *rest.Config) (*views, error) {
	fleetClient, err := fleetclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	metaClient, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	v := &views{
		fleetInformers:    fleetinformers.NewSharedInformerFactory(fleetClient, informerResync),
		metadataInformers: metadatainformer.NewSharedInformerFactory(metaClient, informerResync),
		downstreamCopies:  memstore.New[*courier.DownstreamCopy](),
		fieldCopies:       memstore.New[*courier.FieldCopy](),
	}
	fleet := v.fleetInformers.Fleet().V1alpha1()
	// Sources are watched as metadata only: Courier never holds the data of
	// Secrets it does not copy, and the view needs only existence and
	// resourceVersion.
	secrets := v.metadataInformers.ForResource(corev1.SchemeGroupVersion.WithResource("secrets"))
	configMaps := v.metadataInformers.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps"))
	inputs := copyview.Inputs{
		HelmOps:       fleet.HelmOps().Lister(),
		Clusters:      fleet.Clusters().Lister(),
		ClusterGroups: fleet.ClusterGroups().Lister(),
		Secrets:       secrets.Lister(),
		ConfigMaps:    configMaps.Lister(),
	}
	v.controller, err = copyview.NewController(inputs, v.downstreamCopies,
		fleet.HelmOps().Informer(), fleet.Clusters().Informer(), fleet.ClusterGroups().Informer(),
		secrets.Informer(), configMaps.Informer())
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (v *views) start(ctx context.Context) {
	v.fleetInformers.Start(ctx.Done())
	v.metadataInformers.Start(ctx.Done())
	go v.controller.Run(klog.NewContext(ctx, klog.Background().WithName("downstreamcopies")))
}
