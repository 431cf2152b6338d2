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

// pool is a plain client-go program Courier is compared with: told that
// sources changed (it starts as soon as the upstream updates returned, with
// no watch upstream, so it is a lower bound for any controller), it GETs
// them and writes every copy, one clientset per simulated cluster built
// from the same kubeconfig Secret Courier reads (with the request limit of
// Courier's downstream clients), and workers clusters in flight at once,
// as Courier's engine has. A worker writes one cluster's copies one after
// another, unconditionally (no resourceVersion: one request per copy).
//
// Two pools run in every measured step: the plain loop (side sidePlain),
// whose copies carry one label, the judge; and the same-shape pool
// (sideShape), whose copies carry the frozen fixture of Courier's labels
// and annotations (fixture_test.go), which tells what the kube-apiservers
// charge for that metadata apart from what Courier itself costs. Neither
// calls Courier's code to build its objects.
type pool struct {
	side        string // sidePlain or sideShape
	workers     int
	upstream    kubernetes.Interface
	srcNS       string             // upstream namespace of the pools' sources
	kubeconfigs [][]byte           // kubeconfigs[i] reaches cluster i+1
	destNS      func(i int) string // cluster i's destination namespace in the rounds (i from 1)

	clients []downstream.Clientset // built by the first create
}

func newPool(side string, upstream kubernetes.Interface, srcNS string, kubeconfigs [][]byte, destNS func(int) string) *pool {
	return &pool{side: side, workers: poolWorkers(), upstream: upstream, srcNS: srcNS, kubeconfigs: kubeconfigs, destNS: destNS}
}

// connect builds one clientset per kubeconfig.
func (p *pool) connect() error {
	p.clients = nil
	for _, kc := range p.kubeconfigs {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		if err != nil {
			return err
		}
		cfg.UserAgent = "courier-bench-" + p.side
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

// copyOf is the pool's copy of src in namespace ns: the source's type and
// data, and either one label (benchLabel, which the arrival watcher
// selects on) or the fixture's labels and annotations, the shape of
// Courier's copies.
func (p *pool) copyOf(src *corev1.Secret, ns string) *corev1.Secret {
	c := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: ns, Labels: map[string]string{benchLabel: p.side}},
		Type:       src.Type,
		Data:       src.Data,
	}
	if p.side == sideShape {
		c.Labels, c.Annotations = shapeLabels(), shapeAnnotations()
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

// create is the pool's version of a new HelmOp: it builds its clients
// (the first time only: Courier too keeps a Cluster's client while the
// Cluster exists), then in every cluster creates the destination namespace
// dest(i) and a copy of each named source.
func (p *pool) create(ctx context.Context, names []string, dest func(int) string) error {
	if p.clients == nil {
		if err := p.connect(); err != nil {
			return err
		}
	}
	srcs, err := p.sources(ctx, names)
	if err != nil {
		return err
	}
	return p.each(func(i int) error {
		kube, ns := p.clients[i], dest(i+1)
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
