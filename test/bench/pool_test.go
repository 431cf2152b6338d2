package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/courier-dev/courier/pkg/downstream"
	"github.com/courier-dev/courier/pkg/engine"
	"github.com/courier-dev/courier/test/fleetsim"
)

// poolWorkers is the baseline pool's size: Courier's copy worker count,
// engine.DefaultWorkers unless COURIER_BENCH_ARGS sets --copy-workers, so
// that both sides have the same number of clusters in flight.
func poolWorkers() int {
	args := strings.Fields(os.Getenv("COURIER_BENCH_ARGS"))
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "copy-workers="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
		if a == "copy-workers" && i+1 < len(args) {
			if n, err := strconv.Atoi(args[i+1]); err == nil && n > 0 {
				return n
			}
		}
	}
	return engine.DefaultWorkers
}

// pool is the plain client-go program Courier is compared with: told that
// sources changed (it starts as soon as the upstream updates returned, with
// no watch upstream, so it is a lower bound for any controller), it GETs
// them and writes every copy, one clientset per simulated cluster built
// from the same kubeconfig Secret Courier reads (so with client-go's
// default rate limits, as Courier's downstream clients have), and workers
// clusters in flight at once, as Courier's engine has. A worker writes one
// cluster's copies one after another, unconditionally (no resourceVersion:
// one request per copy).
type pool struct {
	workers     int
	upstream    kubernetes.Interface
	srcNS       string             // upstream namespace of the pool's sources
	kubeconfigs [][]byte           // kubeconfigs[i] reaches cluster i+1
	destNS      func(i int) string // cluster i's destination namespace (i from 1)

	clients []downstream.Clientset // built by create
}

func newPool(upstream kubernetes.Interface, srcNS string, kubeconfigs [][]byte, destNS func(int) string) *pool {
	return &pool{workers: poolWorkers(), upstream: upstream, srcNS: srcNS, kubeconfigs: kubeconfigs, destNS: destNS}
}

// connect builds one clientset per kubeconfig.
func (p *pool) connect() error {
	p.clients = nil
	for _, kc := range p.kubeconfigs {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		if err != nil {
			return err
		}
		cfg.UserAgent = "courier-bench-pool"
		// The same per-cluster request limit as Courier's downstream
		// clients (downstream.QPS, downstream.Burst), not written down twice.
		cfg.QPS, cfg.Burst = downstream.QPS, downstream.Burst
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(downstream.QPS, downstream.Burst)
		var c downstream.Clientset
		if poolWithCourierClient() {
			cfg.Timeout = 10 * time.Second // downstream.Options' default
			c, err = downstream.NewClientset(cfg)
		} else {
			c, err = kubernetes.NewForConfig(cfg)
		}
		if err != nil {
			return err
		}
		p.clients = append(p.clients, c)
	}
	return nil
}

// sources GETs the named sources upstream.
func (p *pool) sources(ctx context.Context, names []string) ([]*corev1.Secret, error) {
	out := make([]*corev1.Secret, 0, len(names))
	for _, name := range names {
		s, err := p.upstream.CoreV1().Secrets(p.srcNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *pool) copyOf(src *corev1.Secret, ns string) *corev1.Secret {
	c := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: ns, Labels: map[string]string{benchLabel: "pool"}},
		Type:       src.Type,
		Data:       src.Data,
	}
	if poolWithCourierMetadata() {
		addCourierLikeMetadata(c, src, ns)
	}
	return c
}

// poolWithCourierClient is COURIER_BENCH_POOL_CLIENT=courier: a
// diagnostic pool whose clients are built as Courier builds its
// downstream ones (downstream.NewClientset: protobuf, two API groups on
// one HTTP client; and a 10 s request timeout), to tell whether the
// client, rather than what Courier does around it, makes Courier's writes
// slower than the pool's.
func poolWithCourierClient() bool { return os.Getenv("COURIER_BENCH_POOL_CLIENT") == "courier" }

// poolWithCourierMetadata is COURIER_BENCH_POOL_METADATA=courier: a
// diagnostic run whose pool writes copies carrying as many labels and
// annotations as Courier's, of the same lengths, under keys of its own
// (DESIGN §1's keys would make them Courier's). It measures what the
// contract's metadata costs the kube-apiservers per write; the figures of
// such a run are not the acceptance figures, whose pool is the plain one.
func poolWithCourierMetadata() bool { return os.Getenv("COURIER_BENCH_POOL_METADATA") == "courier" }

// addCourierLikeMetadata gives c the shape of Courier's labels and
// annotations: managed-by, two 40-hex hashes, the HelmOp, the upstream's
// id, the source's resourceVersion and the Cluster's name.
func addCourierLikeMetadata(c, src *corev1.Secret, ns string) {
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])[:40]
	}
	c.Labels["pool.example/managed-by"] = "courier"
	c.Labels["pool.example/owner"] = hash("owner\x00" + src.Namespace)
	c.Labels["pool.example/cluster-hash"] = hash("cluster\x00" + ns)
	c.Annotations = map[string]string{
		"pool.example/helmop":                  src.Namespace + "/app",
		"pool.example/upstream":                "6f1c2a9e-3b7d-4e21-9a5c-0d8e7f6b5a43",
		"pool.example/source-resource-version": src.ResourceVersion,
		"pool.example/cluster":                 ns,
	}
}

// create is the pool's version of a new HelmOp: it builds its clients,
// then in every cluster creates the destination namespace and a copy of
// each named source.
func (p *pool) create(ctx context.Context, names []string) error {
	if err := p.connect(); err != nil {
		return err
	}
	srcs, err := p.sources(ctx, names)
	if err != nil {
		return err
	}
	return p.each(func(i int) error {
		kube, ns := p.clients[i], p.destNS(i+1)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %d: %w", i+1, err)
		}
		for _, s := range srcs {
			if _, err := kube.CoreV1().Secrets(ns).Create(ctx, p.copyOf(s, ns), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("cluster %d: %w", i+1, err)
			}
		}
		return nil
	})
}

// update writes the named sources' current content over their copies in
// every cluster.
func (p *pool) update(ctx context.Context, names []string) error {
	srcs, err := p.sources(ctx, names)
	if err != nil {
		return err
	}
	return p.each(func(i int) error {
		kube, ns := p.clients[i], p.destNS(i+1)
		for _, s := range srcs {
			if _, err := kube.CoreV1().Secrets(ns).Update(ctx, p.copyOf(s, ns), metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("cluster %d: %w", i+1, err)
			}
		}
		return nil
	})
}

// each runs f for every cluster index, p.workers at a time, and returns
// the first error.
func (p *pool) each(f func(i int) error) error {
	return fleetsim.Parallel(len(p.clients), p.workers, f)
}
