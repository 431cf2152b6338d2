package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// AgentNamespace is where artifacts/agent installs courier-agent.
const AgentNamespace = fleet.SystemNamespace

// agentStopGrace covers the agent's drain of in-flight copies (20 s).
const agentStopGrace = 30 * time.Second

// AgentOptions configures StartAgent.
type AgentOptions struct {
	// Binary is the courier-agent binary (see BuildAgent).
	Binary string
	// Cluster is the Fleet Cluster the agent pulls for, <namespace>/<name>.
	Cluster string
	// User is the upstream identity the agent authenticates as: the
	// Cluster's courier.dev/agent-user. No RBAC is granted upstream; bind
	// courier:agent yourself.
	User string
	// Downstream is the cluster the agent writes into.
	Downstream *Cluster
	// Args are extra flags, after the ones StartAgent sets.
	Args []string
	// RepoRoot holds artifacts/agent. Default: found by RepoRoot.
	RepoRoot string
}

// Agent is a running courier-agent process.
type Agent struct {
	// LogPath is the agent's stdout and stderr.
	LogPath string
	// MetricsURL serves the agent's /metrics; HealthURL its /healthz and
	// /readyz.
	MetricsURL, HealthURL string
	// Kubeconfig is the agent's local identity: the ServiceAccount
	// courier-agent of artifacts/agent in the downstream cluster.
	Kubeconfig string

	proc *process
}

// StartAgent installs artifacts/agent in the downstream cluster (all but
// the Deployment: the agent runs here as a process), gives the agent the
// ServiceAccount's token as its local kubeconfig and a client certificate
// of User upstream, runs it with its own log and returns once it is ready
// (its rows handed to its engine). Env.Stop stops it too.
func (e *Env) StartAgent(ctx context.Context, o AgentOptions) (_ *Agent, err error) {
	if o.Binary == "" || o.Cluster == "" || o.User == "" || o.Downstream == nil {
		return nil, errors.New("localenv: AgentOptions needs Binary, Cluster, User and Downstream")
	}
	if o.RepoRoot == "" {
		if o.RepoRoot, err = RepoRoot(); err != nil {
			return nil, err
		}
	}
	d := o.Downstream
	dir := filepath.Join(o.RepoRoot, "artifacts", "agent")
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"} {
		if _, err := e.Kubectl(ctx, d, "apply", "-f", filepath.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	token, err := e.Kubectl(ctx, d, "create", "token", "courier-agent", "-n", AgentNamespace, "--duration=24h")
	if err != nil {
		return nil, err
	}
	name := "courier-agent-" + fileSafe(d.Name)
	local := filepath.Join(e.opts.Dir, "pki", name, "local.kubeconfig")
	cfg := &rest.Config{Host: d.URL, BearerToken: strings.TrimSpace(token), TLSClientConfig: rest.TLSClientConfig{CAData: d.Config.CAData}}
	if err := writeKubeconfig(local, d.Name, cfg); err != nil {
		return nil, err
	}
	upstream, _, err := e.UserKubeconfig(e.Upstream, o.User)
	if err != nil {
		return nil, err
	}
	binary, err := filepath.Abs(o.Binary)
	if err != nil {
		return nil, err
	}
	p := &process{name: name, path: binary, logPath: filepath.Join(e.opts.Dir, "logs", name+".log"),
		onStart: e.recordPid, grace: agentStopGrace}
	a := &Agent{LogPath: p.logPath, Kubeconfig: local, proc: p}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.agents = append(e.agents, a)
	e.mu.Unlock()
	configure := func(ports []int) error {
		metrics, health := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
		a.MetricsURL, a.HealthURL = "http://"+metrics, "http://"+health
		p.setArgs(append([]string{
			"--cluster=" + o.Cluster,
			"--upstream-kubeconfig=" + upstream,
			"--kubeconfig=" + local,
			"--metrics-bind-address=" + metrics,
			"--health-probe-bind-address=" + health,
		}, o.Args...))
		return nil
	}
	if _, err := e.startOnFreePorts(p, 2, configure, func() error { return a.waitHealthy(ctx) }); err != nil {
		p.stop()
		return nil, err
	}
	if err := a.WaitReady(ctx, 2*time.Minute); err != nil {
		p.stop()
		return nil, err
	}
	e.opts.Log("localenv: courier-agent for %s in %s ready (log %s)", o.Cluster, d.Name, a.LogPath)
	return a, nil
}

// waitHealthy waits until the agent answers /healthz: it has its ports.
func (a *Agent) waitHealthy(ctx context.Context) error {
	err := poll(ctx, apiServiceTimeout, a.proc, func() (bool, error) {
		return a.get(a.HealthURL+"/healthz") == nil, nil
	})
	if err != nil {
		return a.proc.failure(fmt.Errorf("no /healthz: %w", err))
	}
	return nil
}

// WaitReady waits until /readyz answers 200: the agent has listed its rows
// and handed them to its engine.
func (a *Agent) WaitReady(ctx context.Context, timeout time.Duration) error {
	last := "no answer"
	err := poll(ctx, timeout, a.proc, func() (bool, error) {
		err := a.get(a.HealthURL + "/readyz")
		if err != nil {
			last = err.Error()
		}
		return err == nil, nil
	})
	if err != nil {
		return a.proc.failure(fmt.Errorf("/readyz not 200 (last %s): %w", last, err))
	}
	return nil
}

func (a *Agent) get(url string) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// Metrics returns the agent's /metrics.
func (a *Agent) Metrics() (string, error) {
	resp, err := http.Get(a.MetricsURL + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Stop stops the agent (SIGTERM: it finishes the copies it is writing and
// releases its Lease).
func (a *Agent) Stop() { a.proc.stop() }

// Start starts the agent again after Stop, with the same flags and ports,
// and waits until it is ready.
func (a *Agent) Start(ctx context.Context) error {
	if err := a.proc.start(); err != nil {
		return err
	}
	if err := a.waitHealthy(ctx); err != nil {
		return err
	}
	return a.WaitReady(ctx, 2*time.Minute)
}

// BuildAgent builds ./cmd/agent into outPath with the version stamp of
// `make build` (see BuildCourier).
func BuildAgent(ctx context.Context, repoRoot, outPath string) error {
	version := courierVersion(ctx, repoRoot)
	major, minor := majorMinor(version)
	const pkg = "k8s.io/component-base/version"
	ldflags := "-X " + pkg + ".gitVersion=" + version + " -X " + pkg + ".gitMajor=" + major + " -X " + pkg + ".gitMinor=" + minor
	outPath, err := filepath.Abs(outPath)
	if err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", outPath, "-ldflags", ldflags, "./cmd/agent")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/agent: %w\n%s", err, out)
	}
	return nil
}

// AgentBinary returns $COURIER_AGENT_BINARY, else builds ./cmd/agent into
// _output/bin/courier-agent.
func AgentBinary(ctx context.Context, repoRoot string) (string, error) {
	if b := os.Getenv("COURIER_AGENT_BINARY"); b != "" {
		return b, nil
	}
	b := filepath.Join(repoRoot, "_output", "bin", "courier-agent")
	return b, BuildAgent(ctx, repoRoot, b)
}
