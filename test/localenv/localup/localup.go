// Package localup brings up what `make run` runs (hack/localup), so that
// tests can run against exactly that: an upstream cluster set up as a Fleet
// management cluster with Courier's CRDs, the workspace fleet-default with
// downstream-1 pushed (its Cluster has a kubeconfig Secret) and
// downstream-2 pulled by a courier-agent process, the example HelmOp
// `example` and its sources, the field-copy example, the admission
// policies as the chart installs them, and Courier.
//
// hack/localup is the command line over it (a supervisor that outlives
// `make`); tests call Up in a temporary directory, on ports of their own.
package localup

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/courier-dev/courier/test/localenv"
)

// Workspace is the Fleet workspace of the Clusters and the examples.
const Workspace = "fleet-default"

// Config says what Up starts. Paths are absolute or relative to the
// working directory.
type Config struct {
	// Dir is the work directory; it should be empty.
	Dir string
	// BinDir holds kube-apiserver, kube-controller-manager, kubectl, etcd.
	BinDir string
	// CRDs are the Fleet CRDs installed upstream.
	CRDs string
	// Admission are the admission policies, installed after the example
	// HelmOp and before the field-copy example, as the chart installs them.
	Admission string
	// Example is applied upstream after the Fleet objects.
	Example string
	// FieldCopyExample is applied after Example, and Courier then runs
	// with field copies into ConfigMaps of the workspace; "" for none.
	FieldCopyExample string
	// CourierBinary and AgentBinary are run, not built.
	CourierBinary, AgentBinary string
	// Downstreams is the number of downstream clusters (default 2); the
	// second is pulled.
	Downstreams int
	// CourierArgs are extra flags for Courier.
	CourierArgs []string
	// ReadyTimeout bounds each cluster's start (default 3 minutes: the
	// CPU is shared with a build or an editor).
	ReadyTimeout time.Duration
	// Log receives progress and the output of each kubectl run.
	Log func(format string, args ...any)
}

// Defaults is the Config of `make run` for the repository at root: its
// artifacts and the binaries `make build` writes. Dir and BinDir are left
// to the caller.
func Defaults(root string) Config {
	return Config{
		CRDs:             filepath.Join(root, "artifacts", "crds"),
		Admission:        filepath.Join(root, "artifacts", "admission"),
		Example:          filepath.Join(root, "artifacts", "examples", "helmop.yaml"),
		FieldCopyExample: filepath.Join(root, "artifacts", "examples", "fieldcopy.yaml"),
		CourierBinary:    filepath.Join(root, "_output", "bin", "courier-apiserver"),
		AgentBinary:      filepath.Join(root, "_output", "bin", "courier-agent"),
		Downstreams:      2,
	}
}

// Setup is what Up started. Stop it when done.
type Setup struct {
	Env     *localenv.Env
	Courier *localenv.Courier
	// Agents are the pulled clusters' courier-agents.
	Agents []*localenv.Agent
}

// Stop stops every process Up started.
func (s *Setup) Stop() { s.Env.Stop() }

// Up starts the clusters, sets them up and starts Courier and the agents,
// returning once Courier's APIService is Available and every agent is
// ready. On error everything started is stopped.
func Up(ctx context.Context, c Config) (_ *Setup, err error) {
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
	if c.Downstreams == 0 {
		c.Downstreams = 2
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 3 * time.Minute
	}
	if c.CourierBinary == "" || c.AgentBinary == "" {
		return nil, errors.New("localup: Config.CourierBinary and Config.AgentBinary are required")
	}
	env, err := localenv.Start(ctx, localenv.Options{Dir: c.Dir, BinDir: c.BinDir, Downstreams: c.Downstreams,
		ReadyTimeout: c.ReadyTimeout, Log: c.Log})
	if err != nil {
		return nil, err
	}
	s := &Setup{Env: env}
	defer func() {
		if err != nil {
			env.Stop()
		}
	}()
	if err := s.setup(ctx, c); err != nil {
		return nil, err
	}
	return s, nil
}

// setup makes the upstream cluster look like a Fleet management cluster
// with registered downstream clusters, as a user would (kubectl apply), and
// starts Courier and the agents.
func (s *Setup) setup(ctx context.Context, c Config) error {
	kubectl := func(args ...string) error {
		out, err := s.Env.Kubectl(ctx, s.Env.Upstream, args...)
		if out = strings.TrimSpace(out); out != "" {
			c.Log("$ kubectl %s\n%s", strings.Join(args, " "), out)
		}
		return err
	}
	if err := kubectl("apply", "-f", c.CRDs); err != nil {
		return err
	}
	if err := s.Env.WaitEstablished(ctx); err != nil {
		return err
	}
	manifests := filepath.Join(c.Dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return err
	}
	fleet, err := fleetObjects(s.Env.Downstreams)
	if err != nil {
		return err
	}
	fleetFile := filepath.Join(manifests, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte(fleet), 0o600); err != nil {
		return err
	}
	if err := kubectl("apply", "-f", fleetFile); err != nil {
		return err
	}
	if err := kubectl("apply", "-f", c.Example); err != nil {
		return err
	}
	// The admission policies, as the chart installs them: a HelmOp, or a
	// field-copy rule, may name only sources its author may get.
	if err := kubectl("apply", "-f", c.Admission); err != nil {
		return err
	}
	args := c.CourierArgs
	if c.FieldCopyExample != "" {
		if err := kubectl("apply", "-f", c.FieldCopyExample); err != nil {
			return err
		}
		// As the chart starts Courier for field copies: Secret sources on,
		// which the field-copy admission policy above makes safe.
		args = append([]string{"--fieldcopy-target=configmaps", "--fieldcopy-namespace=" + Workspace, "--fieldcopy-secret-sources"}, args...)
	}
	if s.Courier, err = s.Env.StartCourier(ctx, localenv.CourierOptions{Binary: c.CourierBinary, Args: args}); err != nil {
		return err
	}
	c.Log("localup: Courier on 127.0.0.1:%d, log %s", s.Courier.Port, s.Courier.LogPath)
	return s.startAgents(ctx, c, kubectl)
}

// fleetObjects is the workspace, a Cluster per downstream cluster (the
// pulled one's without a kubeconfig Secret) and Fleet's default
// ClusterGroup.
func fleetObjects(downstreams []*localenv.Cluster) (string, error) {
	var fleet strings.Builder
	fmt.Fprintf(&fleet, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", Workspace)
	for i, d := range downstreams {
		if IsPulled(i) {
			fleet.WriteString(pulledCluster(d.Name, i))
			continue
		}
		// Fleet reads a downstream cluster's kubeconfig from the Secret named
		// by the Cluster's kubeConfigSecret, key "value". The admin
		// kubeconfig is a stand-in for the one Fleet's registration creates.
		kc, err := os.ReadFile(d.Kubeconfig)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&fleet, `---
apiVersion: v1
kind: Secret
metadata:
  name: %[1]s-kubeconfig
  namespace: %[2]s
type: Opaque
data:
  value: %[3]s
---
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    env: %[4]s
    name: %[1]s
spec:
  kubeConfigSecret: %[1]s-kubeconfig
`, d.Name, Workspace, base64.StdEncoding.EncodeToString(kc), envLabel(i))
	}
	fmt.Fprintf(&fleet, `---
# Fleet's default group: a HelmOp without targets goes to every cluster in it.
apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata:
  name: default
  namespace: %s
spec:
  selector: {}
`, Workspace)
	return fleet.String(), nil
}

// envLabel is the first cluster's env label "dev", the others' "prod".
func envLabel(i int) string {
	if i == 0 {
		return "dev"
	}
	return "prod"
}
