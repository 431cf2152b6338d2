package sharding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/sharding"
)

// Short timings so that an expiry takes seconds; the same proportions as
// the defaults (lease > deadline > renew + retry).
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	renewPeriod   = 2 * time.Second
	retryPeriod   = time.Second
	buckets       = sharding.DefaultBuckets
)

// partition fails every request of one replica once cut: the replica
// stops renewing without releasing, as a killed or partitioned one does,
// while its Manager keeps running and answering Owns.
type partition struct {
	cut atomic.Bool
	rt  http.RoundTripper
}

func (p *partition) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.cut.Load() {
		return nil, errors.New("partitioned by the test")
	}
	return p.rt.RoundTrip(r)
}

// replica is one Manager run by the test.
type replica struct {
	id     string
	m      *sharding.Manager
	cancel context.CancelFunc
	done   chan error
	net    *partition
}

func startReplica(t *testing.T, rec *terms, id string) *replica {
	t.Helper()
	cfg := rest.CopyConfig(env.Upstream.Config)
	// Renewals of 20-odd buckets every 2 s must not queue behind
	// client-go's default 5 requests/s.
	cfg.QPS, cfg.Burst = 100, 200
	p := &partition{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { p.rt = rt; return p })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sharding.New(client, sharding.Config{
		Namespace: namespace, Identity: id, Buckets: buckets,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RenewPeriod: renewPeriod, RetryPeriod: retryPeriod,
		OnChange: rec.onChange(id),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.watch(id, m)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithName(id)))
	r := &replica{id: id, m: m, cancel: cancel, done: make(chan error, 1), net: p}
	go func() { r.done <- m.Run(ctx) }()
	return r
}

// stop cancels the replica's context and waits for Run to return.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: Run returned %v", r.id, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Run did not return 30 s after cancel", r.id)
	}
}

// bucketLeases returns every bucket Lease on the server by bucket number.
func bucketLeases(ctx context.Context, admin kubernetes.Interface) (map[int]coordinationv1.Lease, error) {
	list, err := admin.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: sharding.BucketLabel + "=true"})
	if err != nil {
		return nil, err
	}
	out := map[int]coordinationv1.Lease{}
	for _, l := range list.Items {
		var n int
		if _, err := fmt.Sscanf(l.Name, sharding.BucketLeasePrefix+"%d", &n); err == nil {
			out[n] = l
		}
	}
	return out, nil
}

// converged says whether every bucket is owned (Owns) by exactly one of
// replicas, the one rendezvous hashing over them names, and its Lease on
// the server names that one; otherwise what is not yet so.
func converged(ctx context.Context, admin kubernetes.Interface, replicas ...*replica) (bool, string) {
	var members []string
	for _, r := range replicas {
		members = append(members, r.id)
	}
	leases, err := bucketLeases(ctx, admin)
	if err != nil {
		return false, err.Error()
	}
	for b := 0; b < buckets; b++ {
		want := sharding.DesiredOwner(b, members)
		var owners []string
		for _, r := range replicas {
			if r.m.Owns(b) {
				owners = append(owners, r.id)
			}
		}
		l := leases[b]
		if holder := ptrString(l.Spec.HolderIdentity); len(owners) != 1 || owners[0] != want || holder != want {
			return false, fmt.Sprintf("bucket %d: owners %v, Lease holder %q, want %s", b, owners, holder, want)
		}
	}
	return true, ""
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// waitFor polls cond every 100 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	began := time.Now()
	last := ""
	for time.Since(began) < timeout {
		ok, why := cond()
		if ok {
			return time.Since(began)
		}
		last = why
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not after %s: %s", what, timeout, last)
	return 0
}

// TestHandOver: three Managers in this process against the real
// kube-apiserver. They settle on rendezvous hashing's owners; one stopped
// hands its buckets over by release (well within a lease duration) and
// the others keep theirs; one cut off from the server (no renewal, no
// release) loses its buckets only after they expire; and at no moment do
// two hold one bucket (terms.check).
func TestHandOver(t *testing.T) {
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	rec := newTerms()
	rec.sample(buckets)
	a, b, c := startReplica(t, rec, "courier-a"), startReplica(t, rec, "courier-b"), startReplica(t, rec, "courier-c")
	took := waitFor(t, 90*time.Second, "three replicas settle", func() (bool, string) { return converged(ctx, admin, a, b, c) })
	t.Logf("3 replicas: every bucket has its one owner after %s (a %d, b %d, c %d buckets)",
		took.Round(time.Millisecond), len(a.m.Held()), len(b.m.Held()), len(c.m.Held()))

	stopHandsOverByRelease(t, ctx, admin, rec, a, b, c)
	cutReplicaLosesOnlyAfterExpiry(t, ctx, admin, rec, a, b)

	if held := metricValue(t, "courier_shard_buckets_held", "courier-a"); held != buckets {
		t.Errorf("courier_shard_buckets_held{identity=courier-a} = %v, want %d", held, buckets)
	}
	b.stop(t)
	a.stop(t)
	rec.check(t)
	leases, err := bucketLeases(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for n, l := range leases {
		if h := ptrString(l.Spec.HolderIdentity); h != "" {
			t.Errorf("bucket %d still held by %q after every replica stopped", n, h)
		}
	}
}

// stopHandsOverByRelease stops c (context cancelled: a clean shutdown).
// Its membership Lease goes, its buckets reach a and b within a lease
// duration (they were released, not left to expire), and no bucket a or
// b held changes hands.
func stopHandsOverByRelease(t *testing.T, ctx context.Context, admin kubernetes.Interface, rec *terms, a, b, c *replica) {
	kept := map[int]time.Time{}
	for _, r := range []*replica{a, b} {
		for _, n := range r.m.Held() {
			kept[n] = rec.gainedAt(r.id, n)
		}
	}
	moved := c.m.Held()
	stopped := time.Now()
	c.stop(t)
	if _, err := admin.CoordinationV1().Leases(namespace).Get(ctx, sharding.MemberLeasePrefix+c.id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("membership Lease of the stopped %s: %v, want NotFound", c.id, err)
	}
	waitFor(t, 30*time.Second, "c's buckets move to a and b", func() (bool, string) { return converged(ctx, admin, a, b) })
	t.Logf("c stopped: its %d buckets with a and b after %s", len(moved), time.Since(stopped).Round(time.Millisecond))
	time.Sleep(100 * time.Millisecond) // Owns turns true just before OnChange records the gain
	for _, n := range moved {
		var gained time.Time
		for _, r := range []*replica{a, b} {
			if g := rec.gainedAt(r.id, n); !g.IsZero() {
				gained = g
			}
		}
		if gained.IsZero() {
			t.Errorf("bucket %d: no gain recorded after c stopped", n)
		} else if d := gained.Sub(stopped); d >= leaseDuration {
			t.Errorf("bucket %d taken %s after c stopped: not by release (lease %s)", n, d, leaseDuration)
		}
	}
	for n, since := range kept {
		owner := sharding.DesiredOwner(n, []string{a.id, b.id})
		if got := rec.gainedAt(owner, n); !got.Equal(since) {
			t.Errorf("bucket %d changed hands when c left (held since %s, now since %s)", n, since, got)
		}
	}
}

// cutReplicaLosesOnlyAfterExpiry cuts b off from the server. b's Owns
// turns false within its renew deadline; a takes each of b's buckets no
// sooner than a lease duration after b's last renewal of its membership
// Lease (renewTime, written by this same process's clock, so comparable
// here), and ends with all.
func cutReplicaLosesOnlyAfterExpiry(t *testing.T, ctx context.Context, admin kubernetes.Interface, rec *terms, a, b *replica) {
	b.net.cut.Store(true)
	cut := time.Now()
	// A request b sent before the cut may still land: its timeout is the
	// retry period. Read the last renewals once none can.
	time.Sleep(retryPeriod + 500*time.Millisecond)
	leases, err := bucketLeases(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	// b's buckets' terms run on its membership renewals alone.
	member, err := admin.CoordinationV1().Leases(namespace).Get(ctx, sharding.MemberLeasePrefix+b.id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastRenewal := map[int]time.Time{}
	for n, l := range leases {
		if ptrString(l.Spec.HolderIdentity) == b.id {
			lastRenewal[n] = member.Spec.RenewTime.Time
		}
	}
	if len(lastRenewal) == 0 {
		t.Fatal("b held no bucket when cut off")
	}
	waitFor(t, 60*time.Second, "a holds every bucket", func() (bool, string) {
		if n := len(a.m.Held()); n != buckets {
			return false, fmt.Sprintf("a holds %d", n)
		}
		return len(b.m.Held()) == 0, "b still holds some"
	})
	t.Logf("b cut off: a holds all %d buckets %s later", buckets, time.Since(cut).Round(time.Millisecond))
	time.Sleep(100 * time.Millisecond) // as above
	var earliest time.Duration = 1 << 62
	for n, renewed := range lastRenewal {
		gained := rec.gainedAt(a.id, n)
		if gained.IsZero() {
			t.Errorf("bucket %d: a's gain not recorded", n)
			continue
		}
		wait := gained.Sub(renewed)
		earliest = min(earliest, wait)
		if wait < leaseDuration {
			t.Errorf("bucket %d: a took it %s after b's last renewal, before the lease (%s) expired", n, wait, leaseDuration)
		}
		if term, _ := a.m.Term(n); term.Holder != a.id || term.Transitions < 1 {
			t.Errorf("bucket %d: term %+v after the take-over", n, term)
		}
	}
	t.Logf("b's %d buckets: a took each at least %s after b's last renewal (lease %s)", len(lastRenewal), earliest.Round(time.Millisecond), leaseDuration)
}

// metricValue reads a gauge of this process's legacy registry, the one
// Courier serves on /metrics.
func metricValue(t *testing.T, name, identity string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "identity" && strings.EqualFold(l.GetValue(), identity) {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{identity=%q}", name, identity)
	return 0
}
