package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"

	// Exposes leader_election_master_status{name="courier-agent"} on
	// /metrics.
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"

	"github.com/courier-dev/courier/pkg/agent"
	"github.com/courier-dev/courier/pkg/apis/courier"
)

// NewCommand returns the courier-agent command.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "courier-agent",
		Short: "Pulls a Fleet Cluster's downstreamResources copies from Courier into this cluster",
		Long: `courier-agent runs in a downstream cluster whose Fleet Cluster carries the
annotation ` + courier.AnnotationAgentUser + `. It watches that Cluster's downstreamcopies
rows in the management cluster, reads each row's payload, writes the copies
into this cluster by the same rules and with the same engine as Courier's push
delivery, and reports each row's status back to Courier.`,
		SilenceUsage: true,
		RunE: func(c *cobra.Command, _ []string) error {
			verflag.PrintAndExitIfRequested()
			o.Complete()
			if err := o.Validate(); err != nil {
				return err
			}
			if err := logsapi.ValidateAndApply(o.Logs, featureGate); err != nil {
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

// Run runs the agent until ctx is done: with leader election, only while
// this replica holds the Lease, and it exits when it loses it (its Pod is
// restarted and campaigns anew), as kube-controller-manager does.
func (o *Options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	completed, err := cfg.Complete()
	if err != nil {
		return err
	}
	a, err := completed.New()
	if err != nil {
		return err
	}
	logger.Info("Starting courier-agent", "version", version.Get().GitVersion, "cluster", o.Cluster)
	if err := o.serve(ctx, a); err != nil {
		return err
	}
	if !o.LeaderElection.LeaderElect {
		return a.Run(ctx)
	}
	return o.campaign(ctx, cfg.Local, a)
}

// campaign runs the agent while this replica holds the Lease.
func (o *Options) campaign(ctx context.Context, local *rest.Config, a *agent.Agent) error {
	le := o.LeaderElection
	lock, err := o.lock(local)
	if err != nil {
		return err
	}
	// The Lease is released only after the agent has stopped (its engine
	// finishes the groups of copies it is writing), so that a new leader
	// never writes beside it.
	leCtx, release := context.WithCancel(context.WithoutCancel(ctx))
	defer release()
	run := &leaderRun{agent: a, done: make(chan struct{}), result: make(chan error, 1), release: release}
	go run.releaseWhenDone(ctx)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: le.ResourceName,
		LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) { run.lead(ctx, leadCtx, lock.Describe(), lock.Identity()) },
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					klog.FromContext(ctx).Info("Lost the Lease; exiting", "lease", lock.Describe())
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(leCtx)
	if ctx.Err() != nil {
		return nil
	}
	select {
	case err := <-run.result:
		if err != nil {
			return err
		}
	default:
	}
	return errors.New("lost the Lease " + lock.Describe())
}

// lock is the agent's Lease in the local cluster.
func (o *Options) lock(local *rest.Config) (resourcelock.Interface, error) {
	le := o.LeaderElection
	cfg := rest.CopyConfig(local)
	cfg.UserAgent = "courier-agent-leader-election"
	// As kube-scheduler does: a renewal (or the release on shutdown) that
	// the cluster does not answer gives up at the renew deadline instead
	// of holding the process.
	cfg.Timeout = le.RenewDeadline.Duration
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
}

// leaderRun is one agent run under the Lease.
type leaderRun struct {
	agent   *agent.Agent
	release func()        // ends the election, releasing the Lease
	result  chan error    // what the agent's Run returned
	done    chan struct{} // closed once the agent's Run returned

	mu      sync.Mutex
	leading bool
}

// lead runs the agent until ctx is done or the Lease is lost (leadCtx).
func (r *leaderRun) lead(ctx, leadCtx context.Context, lease, id string) {
	r.mu.Lock()
	r.leading = true
	r.mu.Unlock()
	defer close(r.done)
	klog.FromContext(ctx).Info("Acquired the Lease", "lease", lease, "identity", id)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-leadCtx.Done(): // the Lease is lost
			cancel()
		case <-runCtx.Done():
		}
	}()
	r.result <- r.agent.Run(runCtx)
	r.release()
}

// releaseWhenDone ends the election once ctx is done and, if the agent
// runs, once it has stopped.
func (r *leaderRun) releaseWhenDone(ctx context.Context) {
	<-ctx.Done()
	r.mu.Lock()
	wait := r.leading
	r.mu.Unlock()
	if wait {
		<-r.done
	}
	r.release()
}

// serve starts /healthz and /readyz on --health-probe-bind-address and
// /metrics on --metrics-bind-address ("0" turns either off; one address
// may serve both). Failing to listen fails the start.
func (o *Options) serve(ctx context.Context, a *agent.Agent) error {
	muxes := map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if muxes[addr] == nil {
			muxes[addr] = http.NewServeMux()
		}
		return muxes[addr]
	}
	if addr := o.HealthProbeBindAddress; addr != "0" && addr != "" {
		m := mux(addr)
		m.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		m.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !a.Ready() {
				http.Error(w, "the rows have not been handed to the engine yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
	}
	if addr := o.MetricsBindAddress; addr != "0" && addr != "" {
		mux(addr).Handle("/metrics", legacyregistry.Handler())
	}
	for addr, m := range muxes {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
	}
	return nil
}
