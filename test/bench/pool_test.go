package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/courier-dev/courier/pkg/copyspec"
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

// copyOf is the pool's copy of src for cluster i, in namespace ns: the
// object Courier writes for a Cluster (copyspec.Secret: the source's type
// and data, DESIGN §1's labels and annotations with values of the same
// lengths), with every key of Courier's renamed to one of the pool's of
// the same length, so that the two sides send the kube-apiservers objects
// of the same shape and Courier's watches, which select on its keys, never
// see the pool's copies. The kube-apiservers' cost per write grows with
// the labels and annotations (docs/benchmarks.md, session 11): a pool
// writing one label would measure the contract's metadata, not Courier.
// COURIER_BENCH_POOL_METADATA=plain gives the one-label copy instead.
func (p *pool) copyOf(src *corev1.Secret, i int, ns string) *corev1.Secret {
	if poolPlainMetadata() {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: ns, Labels: map[string]string{benchLabel: sidePool}},
			Type:       src.Type,
			Data:       src.Data,
		}
	}
	c := copyspec.Secret(src, ns, copyspec.Owner{
		UpstreamID: poolUpstreamID,
		HelmOp:     types.NamespacedName{Namespace: p.srcNS, Name: helmOpName},
		Cluster:    clusterName(i),
	})
	c.Labels = poolKeys(c.Labels)
	c.Labels[benchLabel] = sidePool
	c.Annotations = poolKeys(c.Annotations)
	return c
}

// poolUpstreamID stands in for the upstream's id in the pool's copies: the
// shape of Courier's (the kube-system namespace's UID).
const poolUpstreamID = "6f1c2a9e-3b7d-4e21-9a5c-0d8e7f6b5a43"

// courierKeyPrefix is the prefix of Courier's keys on a copy, and
// poolKeyPrefix the pool's, of the same length.
var courierKeyPrefix = strings.SplitAfter(copyspec.LabelManagedBy, "/")[0]

const poolKeyPrefix = "courierpool/"

// poolKeys returns m with courierKeyPrefix replaced by poolKeyPrefix.
func poolKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if rest, ok := strings.CutPrefix(k, courierKeyPrefix); ok {
			k = poolKeyPrefix + rest
		}
		out[k] = v
	}
	return out
}

// poolWithCourierClient is COURIER_BENCH_POOL_CLIENT=courier: a
// diagnostic pool whose clients are built as Courier builds its
// downstream ones (downstream.NewClientset: protobuf, two API groups on
// one HTTP client; and a 10 s request timeout), to tell whether the
// client, rather than what Courier does around it, makes Courier's writes
// slower than the pool's.
func poolWithCourierClient() bool { return os.Getenv("COURIER_BENCH_POOL_CLIENT") == "courier" }

// poolPlainMetadata is COURIER_BENCH_POOL_METADATA=plain: a diagnostic
// run whose pool writes copies with one label and no annotations, as it
// did until session 11. Its one-source figure against the default run's
// measures what DESIGN §1's labels and annotations cost the
// kube-apiservers per write; its figures are not the acceptance figures.
func poolPlainMetadata() bool { return os.Getenv("COURIER_BENCH_POOL_METADATA") == "plain" }

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
			if _, err := kube.CoreV1().Secrets(ns).Create(ctx, p.copyOf(s, i+1, ns), metav1.CreateOptions{}); err != nil {
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
			if _, err := kube.CoreV1().Secrets(ns).Update(ctx, p.copyOf(s, i+1, ns), metav1.UpdateOptions{}); err != nil {
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
