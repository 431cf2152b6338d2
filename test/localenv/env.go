// Package localenv runs real Kubernetes clusters on loopback for Courier's
// integration and end-to-end tests and for `make run`.
//
// Everything is a real process built from source (hack/build-tools.sh): one
// etcd, and per cluster a kube-apiserver and a kube-controller-manager, so
// tests see what users see (ClusterRole aggregation, namespace deletion,
// garbage collection, the aggregator, real kubectl). Clusters share the etcd
// under distinct --etcd-prefix values; each has its own CA, front-proxy CA
// and service-account key, so credentials of one cluster do not work on
// another, as with separate real clusters.
//
// Servers listen on 127.0.0.1 on ports reserved by ports.go: outside the
// kernel's ephemeral port range, never shared with another test process,
// and a server that finds its port taken anyway starts on another.
//
// Layout of Options.Dir:
//
//	<name>.kubeconfig                    admin kubeconfig (group system:masters)
//	pki/<name>/                          certificates and keys of that cluster
//	users/<name>-<user>.kubeconfig       from UserKubeconfig
//	etcd/                                etcd data
//	logs/<component>-<name>.log          process output; logs/audit-<name>.log
//	pids                                 "pid binary" of every process started
package localenv

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"

	"github.com/courier-dev/courier/pkg/pki"
)

// Options configures Start.
type Options struct {
	// Dir is the work directory (certificates, kubeconfigs, etcd data, logs).
	// It should be fresh for each run: Start does not clean it.
	Dir string
	// BinDir holds kube-apiserver, kube-controller-manager, kubectl and etcd,
	// as printed by hack/build-tools.sh.
	BinDir string
	// Downstreams is the number of downstream clusters, named downstream-1,
	// downstream-2, ... Zero means the default of 2; use a negative number
	// for none.
	Downstreams int
	// ReadyTimeout bounds the wait for each cluster to become ready. All
	// clusters start at once and share the CPU, so on a small machine this
	// must cover several concurrent kube-apiserver starts. Default 90s.
	ReadyTimeout time.Duration
	// Log receives progress messages (for example t.Logf). Default: discard.
	Log func(format string, args ...any)
	// Profiling serves /debug/pprof on the kube-apiservers (to the admin),
	// for benchmarks that profile them. Off by default, as profiling
	// handlers are not something tests should depend on.
	Profiling bool
	// APIServerArgs are more kube-apiserver flags for every cluster, after
	// the defaults (a repeated flag takes the last value). The node suite
	// sets --enable-aggregator-routing=true, which the other suites must
	// not: it refuses their ExternalName Services.
	APIServerArgs []string
}

// Env is a running set of clusters. Stop it when done.
type Env struct {
	Upstream    *Cluster
	Downstreams []*Cluster

	opts    Options
	etcd    *process
	etcdURL string

	mu         sync.Mutex
	procs      []*process // every process, in start order
	couriers   []*Courier
	agents     []*Agent // courier-agents, stopped before Courier: they are its clients
	balancers  []*Balancer
	courierSeq int   // names courier, courier-2, ... (logs, pki dirs)
	ports      []int // reserved for this Env (ports.go); Stop releases them
	stopped    bool
}

// Cluster is one kube-apiserver with its kube-controller-manager.
type Cluster struct {
	Name string
	// URL is https://127.0.0.1:<port>; the port stays the same across
	// Stop and Start.
	URL string
	// Kubeconfig is the path of an admin kubeconfig (client certificate in
	// group system:masters), with everything embedded.
	Kubeconfig string
	// Config is the same credentials as a rest.Config.
	Config *rest.Config
	// AuditLog records every write (create, update, patch, delete) at
	// Metadata level: who did it, as whom (impersonation), to what.
	AuditLog string

	env           *Env
	ca            *pki.KeyPair // signs the serving certificate and all client certificates
	admin         *pki.KeyPair // client certificate of Kubeconfig and Config
	kcmCert       *pki.KeyPair // kube-controller-manager's client certificate
	kcmKubeconfig string
	apiserverArgs func(port int) []string
	apiserver     *process
	kcm           *process
}

// Start starts etcd, then every cluster concurrently, and returns once each
// kube-apiserver answers /readyz and its kube-controller-manager has created
// the default ServiceAccount. ctx bounds only the start: the processes run
// until Stop. On error everything started is stopped again.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	if o.Dir == "" || o.BinDir == "" {
		return nil, errors.New("localenv: Options.Dir and Options.BinDir are required")
	}
	if o.Downstreams == 0 {
		o.Downstreams = 2
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("localenv: %s missing in %s (run hack/build-tools.sh): %w", b, o.BinDir, err)
		}
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	// Not etcd/: etcd creates it with the 0700 mode it insists on.
	for _, d := range []string{"logs", "pki", "users"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}

	e := &Env{opts: o}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	began := time.Now()

	names := []string{"upstream"}
	for i := 1; i <= o.Downstreams; i++ {
		names = append(names, fmt.Sprintf("downstream-%d", i))
	}
	if err := e.startEtcd(ctx); err != nil {
		return nil, err
	}
	clusters := make([]*Cluster, len(names))
	for i, name := range names {
		c, err := e.newCluster(name)
		if err != nil {
			return nil, fmt.Errorf("localenv: cluster %s: %w", name, err)
		}
		clusters[i] = c
	}
	e.Upstream, e.Downstreams = clusters[0], clusters[1:]

	var wg sync.WaitGroup
	errs := make([]error, len(clusters))
	for i, c := range clusters {
		wg.Go(func() { errs[i] = c.startAll(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o.Log("localenv: %d clusters ready in %s (dir %s)", len(clusters), time.Since(began).Round(100*time.Millisecond), o.Dir)
	return e, nil
}

// SignalEtcd sends sig to etcd: SIGSTOP pauses it (every kube-apiserver
// then waits on its storage, as with a stalled disk or a partitioned etcd),
// SIGCONT resumes it.
func (e *Env) SignalEtcd(sig syscall.Signal) error { return e.etcd.signal(sig) }

// Clusters returns the upstream cluster followed by the downstreams.
func (e *Env) Clusters() []*Cluster {
	return append([]*Cluster{e.Upstream}, e.Downstreams...)
}

// Dir is the work directory (absolute).
func (e *Env) Dir() string { return e.opts.Dir }

// Stop stops every process the Env started (agents first, then Courier,
// etcd last) and releases the Env's ports. It is idempotent and safe to
// call from t.Cleanup after a failed test.
func (e *Env) Stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	couriers := e.couriers
	agents := e.agents
	balancers := e.balancers
	procs := e.procs
	e.mu.Unlock()

	// Agents first, so that they do not reconnect and retry against a
	// Courier that is going away.
	var aw sync.WaitGroup
	for _, a := range agents {
		aw.Go(func() { a.proc.stop() })
	}
	aw.Wait()
	var cw sync.WaitGroup
	for _, c := range couriers {
		cw.Go(func() { c.proc.stop() })
	}
	cw.Wait()
	for _, b := range balancers {
		b.Close()
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != e.etcd {
			wg.Go(func() { p.stop() })
		}
	}
	wg.Wait()
	if e.etcd != nil {
		e.etcd.stop()
	}
	e.mu.Lock()
	ports := e.ports
	e.ports = nil
	e.mu.Unlock()
	if a, err := defaultPorts(); err == nil {
		for _, p := range ports {
			a.release(p)
		}
	}
}

// newProcess registers a process so Stop and `localup down` find it.
func (e *Env) newProcess(name, binary string, args []string) *process {
	p := &process{
		name:    name,
		path:    filepath.Join(e.opts.BinDir, binary),
		args:    args,
		logPath: filepath.Join(e.opts.Dir, "logs", name+".log"),
		onStart: e.recordPid,
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// recordPid appends to <Dir>/pids, which lets `localup down` clean up even
// when the supervisor that owns the processes died without stopping them.
func (e *Env) recordPid(pid int, path string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(e.opts.Dir, "pids"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved // compared with /proc/<pid>/exe, which is resolved
	}
	fmt.Fprintf(f, "%d %s\n", pid, path)
}

func (e *Env) isStopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped
}

// startEtcd starts etcd on two reserved ports (client and peer) and sets
// etcdURL, which the kube-apiservers are then configured with.
func (e *Env) startEtcd(ctx context.Context) error {
	dataDir := filepath.Join(e.opts.Dir, "etcd")
	e.etcd = e.newProcess("etcd", "etcd", nil)
	hc := &http.Client{Timeout: 2 * time.Second}
	configure := func(ports []int) error {
		if e.etcdURL != "" {
			// An attempt failed to bind its ports. etcd binds before it
			// writes data, but a member stored with the old peer URL
			// would not start on the new one.
			if err := os.RemoveAll(dataDir); err != nil {
				return err
			}
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		e.etcdURL = client
		e.etcd.setArgs([]string{
			"--name=localenv",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=localenv=" + peer,
			// Test data: durability across a machine crash is worthless,
			// and fsync on a shared disk is the slowest part of every
			// write.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		})
		return nil
	}
	wait := func() error {
		err := poll(ctx, 30*time.Second, e.etcd, func() (bool, error) {
			resp, err := hc.Get(e.etcdURL + "/health")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
		if err != nil {
			return e.etcd.failure(fmt.Errorf("not healthy: %w", err))
		}
		return nil
	}
	if _, err := e.startOnFreePorts(e.etcd, 2, configure, wait); err != nil {
		return err
	}
	e.opts.Log("localenv: etcd ready at %s", e.etcdURL)
	return nil
}

// newCluster generates the cluster's PKI and prepares (but does not start)
// its processes. What names the API server's port (URL, Config, the
// kubeconfigs, --secure-port) is set by usePort once the port is known.
func (e *Env) newCluster(name string) (*Cluster, error) {
	dir := filepath.Join(e.opts.Dir, "pki", name)
	c := &Cluster{
		Name:          name,
		Kubeconfig:    filepath.Join(e.opts.Dir, name+".kubeconfig"),
		AuditLog:      filepath.Join(e.opts.Dir, "logs", "audit-"+name+".log"),
		kcmKubeconfig: filepath.Join(dir, "controller-manager.kubeconfig"),
		env:           e,
	}
	var err error
	if c.ca, err = newCA(name + "-ca"); err != nil {
		return nil, err
	}
	caFile, _, err := writeKeyPair(c.ca, dir, "ca")
	if err != nil {
		return nil, err
	}
	serving, err := c.ca.Issue(pki.CertSpec{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)},
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := writeKeyPair(serving, dir, "apiserver")
	if err != nil {
		return nil, err
	}
	// The aggregator authenticates to aggregated servers (Courier) with the
	// proxy client certificate and passes the user in X-Remote-* headers,
	// which those servers trust only from certificates of this CA with the
	// allowed name.
	frontCA, err := newCA(name + "-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	frontCAFile, _, err := writeKeyPair(frontCA, dir, "front-proxy-ca")
	if err != nil {
		return nil, err
	}
	proxy, err := frontCA.Issue(pki.CertSpec{CommonName: "front-proxy-client", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := writeKeyPair(proxy, dir, "front-proxy-client")
	if err != nil {
		return nil, err
	}
	saKey, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return nil, err
	}
	saKeyFile := filepath.Join(dir, "sa.key")
	saPubFile := filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(saKeyFile, saKeyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writePublicKey(saPubFile, saKey); err != nil {
		return nil, err
	}

	if c.admin, err = c.ca.Issue(pki.CertSpec{CommonName: "admin", Organization: []string{"system:masters"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, err
	}
	// kube-controller-manager uses its own identity, bound by the bootstrap
	// RBAC policy, as in kubeadm clusters: this keeps RBAC behaviour real.
	if c.kcmCert, err = c.ca.Issue(pki.CertSpec{CommonName: "system:kube-controller-manager", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, err
	}

	c.apiserverArgs = func(port int) []string {
		return append([]string{
			"--etcd-servers=" + e.etcdURL,
			"--etcd-prefix=/registry-" + name,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			// Loopback cannot be an advertised endpoint of the kubernetes
			// Service; without this kube-apiserver refuses 127.0.0.1.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + dir,
			"--tls-cert-file=" + servingCert,
			"--tls-private-key-file=" + servingKey,
			"--client-ca-file=" + caFile,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + saPubFile,
			"--service-account-signing-key-file=" + saKeyFile,
			"--service-cluster-ip-range=10.0.0.0/24",
			"--authorization-mode=Node,RBAC",
			"--requestheader-client-ca-file=" + frontCAFile,
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + proxyCert,
			"--proxy-client-key-file=" + proxyKey,
			"--audit-policy-file=" + filepath.Join(e.opts.Dir, "audit-policy.yaml"),
			"--audit-log-path=" + c.AuditLog,
			"--profiling=" + strconv.FormatBool(e.opts.Profiling),
		}, e.opts.APIServerArgs...)
	}
	c.apiserver = e.newProcess("kube-apiserver-"+name, "kube-apiserver", nil)
	c.kcm = e.newProcess("kube-controller-manager-"+name, "kube-controller-manager", []string{
		"--kubeconfig=" + c.kcmKubeconfig,
		"--leader-elect=false",
		// 0 turns the serving endpoint off: nothing here needs its metrics,
		// and it removes a port that could collide.
		"--secure-port=0",
		"--service-account-private-key-file=" + saKeyFile,
		"--root-ca-file=" + caFile,
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=10.0.0.0/24",
	})
	return c, nil
}

// usePort points everything that names the API server's port at port:
// URL, Config, both kubeconfigs and --secure-port. The serving certificate
// names only hosts and IPs, so it stays.
func (c *Cluster) usePort(port int) error {
	c.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	c.Config = clientCertConfig(c.URL, c.ca.CertPEM, c.admin)
	if err := writeKubeconfig(c.Kubeconfig, c.Name, c.Config); err != nil {
		return err
	}
	if err := writeKubeconfig(c.kcmKubeconfig, c.Name, clientCertConfig(c.URL, c.ca.CertPEM, c.kcmCert)); err != nil {
		return err
	}
	c.apiserver.setArgs(c.apiserverArgs(port))
	return nil
}

// startAll starts kube-apiserver on a reserved port (another one if that
// port turns out taken), waits for /readyz, starts kube-controller-manager
// (which exits when it cannot reach the API server quickly) and waits for
// the default ServiceAccount it creates.
func (c *Cluster) startAll(ctx context.Context) error {
	began := time.Now()
	configure := func(ports []int) error { return c.usePort(ports[0]) }
	wait := func() error { return c.waitAPIServer(ctx) }
	if _, err := c.env.startOnFreePorts(c.apiserver, 1, configure, wait); err != nil {
		return err
	}
	if err := c.kcm.start(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	err = poll(ctx, c.env.opts.ReadyTimeout, c.kcm, func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return c.kcm.failure(fmt.Errorf("default ServiceAccount never appeared: %w", err))
	}
	c.env.opts.Log("localenv: cluster %s ready at %s in %s", c.Name, c.URL, time.Since(began).Round(100*time.Millisecond))
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	if c.env.isStopped() {
		return errors.New("localenv: the Env has been stopped")
	}
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return c.waitAPIServer(ctx)
}

// waitAPIServer waits until kube-apiserver answers /readyz with 200.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return err
	}
	hc.Timeout = 5 * time.Second
	err = poll(ctx, c.env.opts.ReadyTimeout, c.apiserver, func() (bool, error) {
		resp, err := hc.Get(c.URL + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return c.apiserver.failure(fmt.Errorf("/readyz never returned 200: %w", err))
	}
	return nil
}

// Stop stops this cluster's kube-apiserver (and only it): clients then see
// connection refused, as with a cluster that went away. Its
// kube-controller-manager keeps running and reconnects after Start.
func (c *Cluster) Stop() { c.apiserver.stop() }

// Start starts the kube-apiserver stopped by Stop again, on the same port
// (still reserved for the Env) with the same data and certificates, and
// waits for /readyz.
func (c *Cluster) Start(ctx context.Context) error { return c.startAPIServer(ctx) }

// UserKubeconfig writes a kubeconfig for user (in groups) on cluster c,
// authenticated by a client certificate from c's CA, and returns its path
// and the same credentials as a rest.Config. No RBAC is granted: tests bind
// what they need, which is the point of having a non-admin identity.
func (e *Env) UserKubeconfig(c *Cluster, user string, groups ...string) (string, *rest.Config, error) {
	kp, err := c.ca.Issue(pki.CertSpec{CommonName: user, Organization: groups, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return "", nil, err
	}
	cfg := clientCertConfig(c.URL, c.ca.CertPEM, kp)
	path := filepath.Join(e.opts.Dir, "users", c.Name+"-"+fileSafe(user)+".kubeconfig")
	if err := writeKubeconfig(path, c.Name, cfg); err != nil {
		return "", nil, err
	}
	return path, cfg, nil
}

// Kubectl runs the real kubectl against c with its admin kubeconfig and
// returns stdout. The error carries stderr, which is where kubectl explains.
func (e *Env) Kubectl(ctx context.Context, c *Cluster, args ...string) (string, error) {
	return e.kubectl(ctx, c.Kubeconfig, "", args...)
}

// kubectl runs kubectl with kubeconfig and, if stdin is not empty, feeds it
// (for `apply -f -`).
func (e *Env) kubectl(ctx context.Context, kubeconfig, stdin string, args ...string) (string, error) {
	full := append([]string{"--kubeconfig=" + kubeconfig, "--cache-dir=" + filepath.Join(e.opts.Dir, "kubectl-cache")}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(e.opts.BinDir, "kubectl"), full...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// poll calls cond every 250ms until it returns true, an error, ctx ends,
// timeout passes, or p (if not nil) exits: a crashed server fails at once
// instead of after the whole timeout.
func poll(ctx context.Context, timeout time.Duration, p *process, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if p != nil {
			if done, why := p.exited(); done {
				return fmt.Errorf("process exited: %w", why)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s: %w", timeout, ctx.Err())
		case <-t.C:
		}
	}
}

// fileSafe maps a user name such as system:serviceaccount:ns:sa to a file
// name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, s)
}

// KillRecorded kills the process groups listed in <dir>/pids whose process
// still runs the recorded binary. It is for `localup down` when the
// supervisor is gone; the binary check keeps it from killing an unrelated
// process that reused a pid.
func KillRecorded(dir string) (killed int) {
	data, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		pidStr, path, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 1 {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != path {
			continue
		}
		if syscall.Kill(-pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// auditPolicy logs writes only, at Metadata level (never request bodies:
// they would hold Secret data). Reads would make the log huge and say
// nothing a test needs.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// WaitEstablished waits up to a minute until the upstream serves the named
// CRDs (every CRD when no name is given): condition Established. Not
// `kubectl wait`: right after a create a CRD's status.conditions can be
// null, which kubectl wait reports as an error ("accessor error") instead
// of waiting.
func (e *Env) WaitEstablished(ctx context.Context, names ...string) error {
	dc, err := dynamic.NewForConfig(e.Upstream.Config)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		list, err := dc.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, crd := range list.Items {
			names = append(names, crd.GetName())
		}
	}
	last := ""
	err = poll(ctx, time.Minute, nil, func() (bool, error) {
		for _, name := range names {
			crd, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if !established {
				last = "CRD " + name + " is not Established yet"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRDs %v: %s: %w", names, last, err)
	}
	return nil
}
