package localenv

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/pkg/pki"
)

const (
	// ModulePath identifies Courier's repository root (see RepoRoot).
	ModulePath = "github.com/courier-dev/courier"
	// APIServiceName is the APIService that StartCourier registers.
	APIServiceName = "v1alpha1.courier.dev"
	// DefaultCourierNamespace is where artifacts/rbac puts Courier.
	DefaultCourierNamespace = "courier-system"
	courierServiceName      = "courier-api"
	courierServiceAccount   = "courier"
	apiServiceTimeout       = 60 * time.Second
	// courierStopGrace is longer than Courier's drain of in-flight copies
	// (20 s) plus the API server's shutdown.
	courierStopGrace = 40 * time.Second
)

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// CourierOptions configures StartCourier.
type CourierOptions struct {
	// Binary is the Courier API server binary (see BuildCourier).
	Binary string
	// Args are extra flags, after the ones StartCourier sets.
	Args []string
	// Namespace for Courier's ServiceAccount and Service. Default
	// courier-system, the namespace artifacts/rbac names.
	Namespace string
	// RepoRoot holds artifacts/rbac. Default: found from the working
	// directory by RepoRoot.
	RepoRoot string
}

// Courier is a running Courier process registered with the upstream
// cluster's aggregator.
type Courier struct {
	// Port is Courier's serving port on 127.0.0.1; it stays the same
	// across Stop and Start, as the APIService's Service points at it.
	Port int
	// CABundle is the PEM CA that signed Courier's serving certificate (the
	// APIService's caBundle).
	CABundle []byte
	// LogPath is Courier's stdout and stderr.
	LogPath string
	// Kubeconfig is Courier's own kubeconfig: the courier ServiceAccount's
	// token for the upstream cluster.
	Kubeconfig string
	// Config reaches Courier directly (not through the aggregator), trusting
	// CABundle and authenticating with the upstream admin certificate, which
	// Courier accepts because it trusts the upstream client CA.
	Config *rest.Config

	env          *Env
	proc         *process
	namespace    string
	baseArgs     []string // the flags StartCourier started it with
	registration string   // the Service and APIService manifests that route to it
}

// StartCourier installs Courier's RBAC in the upstream cluster (kubectl
// apply -f artifacts/rbac/), gives it a ServiceAccount token kubeconfig and
// a serving certificate, runs the binary on a free loopback port and
// registers it with the aggregator through an ExternalName Service pointing
// at localhost. It returns once the APIService is Available. Env.Stop stops
// it too.
func (e *Env) StartCourier(ctx context.Context, o CourierOptions) (*Courier, error) {
	cs, _, err := e.startCouriers(ctx, o, 1)
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// StartCourierReplicas starts n Courier processes that share one serving
// certificate and one kubeconfig, as a Deployment's Pods share a Secret,
// behind a Balancer that plays their Service; the APIService points at the
// Balancer. It returns once every replica is ready and the APIService is
// Available. Replicas elect a leader unless o.Args turn that off.
func (e *Env) StartCourierReplicas(ctx context.Context, o CourierOptions, n int) ([]*Courier, *Balancer, error) {
	if n < 2 {
		return nil, nil, fmt.Errorf("localenv: StartCourierReplicas needs at least 2 replicas, got %d", n)
	}
	return e.startCouriers(ctx, o, n)
}

func (e *Env) startCouriers(ctx context.Context, o CourierOptions, n int) (_ []*Courier, _ *Balancer, err error) {
	if o.Binary == "" {
		return nil, nil, errors.New("localenv: CourierOptions.Binary is required")
	}
	if o.Namespace == "" {
		o.Namespace = DefaultCourierNamespace
	}
	if o.RepoRoot == "" {
		if o.RepoRoot, err = RepoRoot(); err != nil {
			return nil, nil, err
		}
	}
	if e.isStopped() {
		return nil, nil, errors.New("localenv: the Env has been stopped")
	}
	up := e.Upstream

	e.mu.Lock()
	e.courierSeq++
	name := "courier"
	if e.courierSeq > 1 {
		name = fmt.Sprintf("courier-%d", e.courierSeq)
	}
	e.mu.Unlock()

	if err := e.applyCourierRBAC(ctx, o); err != nil {
		return nil, nil, err
	}
	token, err := e.Kubectl(ctx, up, "create", "token", courierServiceAccount, "-n", o.Namespace, "--duration=24h")
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(e.opts.Dir, "pki", name)
	kubeconfig := filepath.Join(dir, "courier.kubeconfig")
	saCfg := &rest.Config{Host: up.URL, BearerToken: strings.TrimSpace(token), TLSClientConfig: rest.TLSClientConfig{CAData: up.Config.CAData}}
	if err := writeKubeconfig(kubeconfig, up.Name, saCfg); err != nil {
		return nil, nil, err
	}

	ca, err := newCA(name + "-ca")
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := writeKeyPair(ca, dir, "ca"); err != nil {
		return nil, nil, err
	}
	svc := courierServiceName + "." + o.Namespace + ".svc"
	serving, err := ca.Issue(pki.CertSpec{
		CommonName: svc,
		// The aggregator verifies <service>.<namespace>.svc; the rest are
		// for direct access.
		DNSNames: []string{svc, svc + ".cluster.local", "localhost"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1)},
		Usages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, nil, err
	}
	certFile, keyFile, err := writeKeyPair(serving, dir, "serving")
	if err != nil {
		return nil, nil, err
	}
	binary, err := filepath.Abs(o.Binary)
	if err != nil {
		return nil, nil, err
	}
	var couriers []*Courier
	defer func() {
		if err != nil {
			for _, c := range couriers {
				c.proc.stop()
			}
		}
	}()
	for i := range n {
		replica := name
		if n > 1 {
			replica = fmt.Sprintf("%s-%c", name, 'a'+i)
		}
		p := &process{
			name:    replica,
			path:    binary,
			logPath: filepath.Join(e.opts.Dir, "logs", replica+".log"),
			onStart: e.recordPid,
			grace:   courierStopGrace,
		}
		c := &Courier{
			CABundle:   ca.CertPEM,
			LogPath:    p.logPath,
			Kubeconfig: kubeconfig,
			env:        e,
			proc:       p,
			namespace:  o.Namespace,
		}
		couriers = append(couriers, c)
		e.mu.Lock()
		e.couriers = append(e.couriers, c)
		e.mu.Unlock()
	}
	// Every replica serves on its port before the Service and APIService
	// (or the Balancer) name it: a replica whose port turned out taken
	// starts again on another.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, c := range couriers {
		wg.Go(func() {
			configure := func(ports []int) error {
				c.usePort(ports[0], append([]string{
					"--secure-port=" + strconv.Itoa(ports[0]),
					"--bind-address=127.0.0.1",
					"--tls-cert-file=" + certFile,
					"--tls-private-key-file=" + keyFile,
					"--kubeconfig=" + kubeconfig,
					"--authentication-kubeconfig=" + kubeconfig,
					"--authorization-kubeconfig=" + kubeconfig,
					// Where applyCourierRBAC let it keep agents' reports.
					"--agent-report-namespace=" + o.Namespace,
					// Its Pod name, were it in a Pod: replicas on one host
					// share a host name, and the shard Leases need them apart.
					"--shard-identity=" + c.proc.name,
				}, o.Args...))
				return nil
			}
			wait := func() error { return c.waitServing(ctx) }
			_, errs[i] = e.startOnFreePorts(c.proc, 1, configure, wait)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	ports := make([]int, n)
	for i, c := range couriers {
		ports[i] = c.Port
	}
	// One replica is the Service's only endpoint; several sit behind a
	// Balancer.
	servicePort := ports[0]
	var lb *Balancer
	if n > 1 {
		if lb, err = e.newBalancer(couriers); err != nil {
			return nil, nil, err
		}
		e.mu.Lock()
		e.balancers = append(e.balancers, lb)
		e.mu.Unlock()
		servicePort = lb.Port
	}
	registration := courierRegistration(o.Namespace, servicePort, ca.CertPEM)
	for _, c := range couriers {
		c.registration = registration
	}
	if err := couriers[0].register(ctx); err != nil {
		return nil, nil, err
	}
	for _, c := range couriers {
		if err := c.waitReady(ctx); err != nil {
			return nil, nil, err
		}
	}
	e.opts.Log("localenv: %d Courier replica(s) serving on ports %v (Service port %d), APIService %s Available", n, ports, servicePort, APIServiceName)
	return couriers, lb, nil
}

// usePort sets the port Courier serves on, the Config that reaches it
// there and the arguments (which name the port) of its next start. The
// serving certificate names only hosts and IPs, so it stays.
func (c *Courier) usePort(port int, args []string) {
	admin := c.env.Upstream.Config
	c.Port = port
	c.Config = &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(port),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.CABundle,
			CertData: admin.CertData,
			KeyData:  admin.KeyData,
		},
		QPS:   admin.QPS,
		Burst: admin.Burst,
	}
	c.proc.setArgs(args)
}

// waitServing waits until Courier answers HTTPS with a certificate of its
// CA, whatever the status: then it, and not another process, has its port.
// Courier binds the port while it builds its configuration, long before it
// is ready.
func (c *Courier) waitServing(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return err
	}
	hc.Timeout = 5 * time.Second
	err = poll(ctx, apiServiceTimeout, c.proc, func() (bool, error) {
		resp, err := hc.Get(c.Config.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	})
	if err != nil {
		return c.proc.failure(fmt.Errorf("no HTTPS answer on port %d: %w", c.Port, err))
	}
	return nil
}

// register applies the Service and APIService that route to this Courier
// (or to its replicas' Balancer), as they were when it was started:
// another Courier started since may have pointed them elsewhere.
func (c *Courier) register(ctx context.Context) error {
	if _, err := c.env.kubectl(ctx, c.env.Upstream.Kubeconfig, c.registration, "apply", "-f", "-"); err != nil {
		return c.proc.failure(err)
	}
	return nil
}

// applyCourierRBAC applies artifacts/rbac as a user would. For a namespace
// other than the one the manifests name, it rewrites that name first.
func (e *Env) applyCourierRBAC(ctx context.Context, o CourierOptions) error {
	dir := filepath.Join(o.RepoRoot, "artifacts", "rbac")
	if o.Namespace == DefaultCourierNamespace {
		_, err := e.Kubectl(ctx, e.Upstream, "apply", "-f", dir)
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	var docs []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		docs = append(docs, strings.ReplaceAll(string(data), DefaultCourierNamespace, o.Namespace))
	}
	_, err = e.kubectl(ctx, e.Upstream.Kubeconfig, strings.Join(docs, "\n---\n"), "apply", "-f", "-")
	return err
}

// courierRegistration is the local form of artifacts/service.yaml and
// artifacts/apiservice.yaml: Courier runs on the host, not in a Pod, so the
// Service is an ExternalName for localhost with Courier's port (the
// aggregator resolves it to localhost:<port> and still checks the
// certificate for <service>.<namespace>.svc).
func courierRegistration(ns string, port int, caPEM []byte) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  type: ExternalName
  externalName: localhost
  ports:
  - name: https
    port: %[3]d
    protocol: TCP
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: %[4]s
spec:
  group: courier.dev
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service:
    namespace: %[2]s
    name: %[1]s
    port: %[3]d
  caBundle: %[5]s
`, courierServiceName, ns, port, APIServiceName, base64.StdEncoding.EncodeToString(caPEM))
}

// Stop stops the Courier process (SIGTERM, then SIGKILL after
// courierStopGrace, which covers Courier's drain of in-flight copies). The
// APIService stays registered and turns unavailable.
// It reports whether Courier exited on SIGTERM alone, before the grace ran out.
func (c *Courier) Stop() (exitedOnItsOwn bool) { return c.proc.stop() }

// Binary is the Courier binary this process runs.
func (c *Courier) Binary() string { return c.proc.path }

// Name is the replica's name: its log file's, and its --shard-identity.
func (c *Courier) Name() string { return c.proc.name }

// Kill stops the Courier process with SIGKILL, as a node failure or the
// OOM killer would: nothing is drained, the Lease is not released.
func (c *Courier) Kill() { c.proc.kill() }

// Pid is the running Courier process's id, or 0 when it is not running.
func (c *Courier) Pid() int {
	if done, _ := c.proc.exited(); done {
		return 0
	}
	c.proc.mu.Lock()
	defer c.proc.mu.Unlock()
	return c.proc.cmd.Process.Pid
}

// Start starts Courier again after Stop, on the same port with the same
// flags, and waits as StartCourier does.
func (c *Courier) Start(ctx context.Context) error {
	if c.env.isStopped() {
		return errors.New("localenv: the Env has been stopped")
	}
	if err := c.proc.start(); err != nil {
		return err
	}
	if err := c.register(ctx); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// waitReady waits until Courier itself answers /readyz (its caches are
// synced) and the aggregator reports the APIService Available. Both are
// needed: the aggregator only checks discovery, which Courier serves before
// it is ready, and after a restart the APIService may still show the
// Available of the previous process.
func (c *Courier) waitReady(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return err
	}
	hc.Timeout = 5 * time.Second
	status := "no answer"
	err = poll(ctx, apiServiceTimeout, c.proc, func() (bool, error) {
		resp, err := hc.Get(c.Config.Host + "/readyz?verbose")
		if err != nil {
			status = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		resp.Body.Close()
		status = fmt.Sprintf("%d: %s", resp.StatusCode, failedChecks(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return c.proc.failure(fmt.Errorf("/readyz not 200 (last %s): %w", status, err))
	}
	return c.waitAvailable(ctx)
}

// failedChecks picks the failing lines ("[-]name failed: reason") out of a
// verbose /readyz answer.
func failedChecks(body string) string {
	var failed []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "[-]") {
			failed = append(failed, line)
		}
	}
	if len(failed) == 0 {
		return strings.TrimSpace(body)
	}
	return strings.Join(failed, "; ")
}

// waitAvailable waits for the APIService condition Available=True. On
// failure the error carries the aggregator's reason and Courier's log.
func (c *Courier) waitAvailable(ctx context.Context) error {
	dc, err := dynamic.NewForConfig(c.env.Upstream.Config)
	if err != nil {
		return err
	}
	last := "APIService not found"
	err = poll(ctx, apiServiceTimeout, c.proc, func() (bool, error) {
		obj, err := dc.Resource(apiServiceGVR).Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ok, msg := apiServiceAvailable(obj)
		last = msg
		return ok, nil
	})
	if err != nil {
		return c.proc.failure(fmt.Errorf("APIService %s not Available (%s): %w", APIServiceName, last, err))
	}
	return nil
}

// apiServiceAvailable reads the Available condition of an APIService and
// returns it with its reason and message.
func apiServiceAvailable(obj *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Available" {
			continue
		}
		return m["status"] == "True", fmt.Sprintf("Available=%v %v: %v", m["status"], m["reason"], m["message"])
	}
	return false, "no Available condition yet"
}

// BuildCourier builds ./cmd/apiserver of the repository at repoRoot into
// outPath, stamping k8s.io/component-base/version the way `make build` does
// (see courierVersion), so tests and `make run` run the binary users get.
// The stamp must be semantic: k8s.io/apiserver parses it at init and
// panics on anything else (a bare `git describe` hash, say).
func BuildCourier(ctx context.Context, repoRoot, outPath string) error {
	version := courierVersion(ctx, repoRoot)
	major, minor := majorMinor(version)
	const pkg = "k8s.io/component-base/version"
	ldflags := []string{
		"-X " + pkg + ".gitVersion=" + version,
		"-X " + pkg + ".gitMajor=" + major,
		"-X " + pkg + ".gitMinor=" + minor,
	}
	outPath, err := filepath.Abs(outPath)
	if err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", outPath, "-ldflags", strings.Join(ldflags, " "), "./cmd/apiserver")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/apiserver: %w\n%s", err, out)
	}
	return nil
}

// courierVersion is the Makefile's VERSION: the nearest v* tag from git
// describe, else v0.1.0-alpha.0+<short commit>. Keep the two in step.
func courierVersion(ctx context.Context, repoRoot string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if v, err := git("describe", "--tags", "--match", "v*"); err == nil && v != "" {
		return v
	}
	short, err := git("rev-parse", "--short", "HEAD")
	if err != nil || short == "" {
		short = "unknown"
	}
	return "v0.1.0-alpha.0+" + short
}

// majorMinor returns the major and minor numbers of a vMAJOR.MINOR.PATCH
// version (0 and 1, the Makefile's values, when it has another form).
func majorMinor(version string) (major, minor string) {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) == 3 {
		_, errMajor := strconv.Atoi(parts[0])
		_, errMinor := strconv.Atoi(parts[1])
		if errMajor == nil && errMinor == nil {
			return parts[0], parts[1]
		}
	}
	return "0", "1"
}

// RepoRoot finds Courier's repository root: the nearest directory at or
// above the working directory whose go.mod declares ModulePath. Tests run in
// their package directory, `make` in the root; both find it.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == ModulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("localenv: no go.mod for %s at or above the working directory", ModulePath)
		}
		dir = parent
	}
}

// StartWith starts Courier again after Stop, like Start, with extra flags
// added to the ones it was first started with (nil restores those).
func (c *Courier) StartWith(ctx context.Context, extra []string) error {
	c.proc.mu.Lock()
	if c.baseArgs == nil {
		c.baseArgs = append([]string(nil), c.proc.args...)
	}
	c.proc.args = append(append([]string(nil), c.baseArgs...), extra...)
	c.proc.mu.Unlock()
	return c.Start(ctx)
}
