package sharding

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Manager takes part in membership and holds this replica's buckets. Use
// New, then Run; Owns and Term may be called from any goroutine.
type Manager struct {
	cfg     Config
	leases  coordinationv1client.LeaseInterface
	client  kubernetes.Interface // nil in unit tests, which feed observations directly
	members *observer            // membership Leases
	buckets *observer            // bucket Leases

	mu   sync.Mutex
	held map[int]*heldBucket // guarded by mu
	// renewedAt is when the last successful write of the membership Lease
	// was sent, validUntil renewedAt + RenewDeadline: every held bucket's
	// term ends there on this replica's clock (zero: no term). Guarded by
	// mu.
	renewedAt, validUntil time.Time

	// Owned by the loop alone.
	member        *coordinationv1.Lease // this replica's membership Lease, as last written
	memberTriedAt time.Time             // when the last failed membership write was sent (zero after a success)
	unheldSince   map[int]time.Time     // buckets without a valid holder, since when (this replica's clock)
	absentSince   map[string]time.Time  // holders' membership Leases not seen, since when (this replica's clock)
}

// heldBucket is a bucket Lease this replica holds, as it wrote it when it
// took the bucket. It is not renewed: the membership Lease's renewals keep
// its term running.
type heldBucket struct {
	lease *coordinationv1.Lease
}

// Term is a bucket's current term: who holds its Lease and how many times
// the Lease changed hands before. (Holder, Transitions) names one term
// uniquely, so an audit can tell whether two writes came from one term.
type Term struct {
	Holder      string
	Transitions int32
	// Here says this replica holds the bucket now (Owns).
	Here bool
}

// New returns a Manager for cfg (see Config.Validate) using client for
// the Leases in cfg.Namespace.
func New(client kubernetes.Interface, cfg Config) (*Manager, error) {
	m, err := newManager(client.CoordinationV1().Leases(cfg.Namespace), cfg)
	if err != nil {
		return nil, err
	}
	m.client = client
	registerMetrics()
	return m, nil
}

// newManager builds a Manager on leases, without informers.
func newManager(leases coordinationv1client.LeaseInterface, cfg Config) (*Manager, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("sharding: %w", errors.Join(errs...))
	}
	cfg = cfg.withDefaults()
	return &Manager{
		cfg: cfg, leases: leases,
		members: newObserver(cfg.Clock), buckets: newObserver(cfg.Clock),
		held: map[int]*heldBucket{}, unheldSince: map[int]time.Time{}, absentSince: map[string]time.Time{},
	}, nil
}

// Owns reports whether this replica may deliver for bucket now: it holds
// the bucket's Lease and, by its own clock, less than RenewDeadline has
// passed since it sent its last successful renewal of its membership
// Lease. It turns false on its own when the deadline passes, before the
// loop notices, so a writer that checks it before each write never writes
// after its term ended.
func (m *Manager) Owns(bucket int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[bucket] != nil && m.cfg.Clock.Now().Before(m.validUntil)
}

// Held returns the buckets Owns is true for, sorted.
func (m *Manager) Held() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.cfg.Clock.Now().Before(m.validUntil) {
		return nil
	}
	out := make([]int, 0, len(m.held))
	for b := range m.held {
		out = append(out, b)
	}
	sort.Ints(out)
	return out
}

// Term returns bucket's current term as this replica knows it: its own
// when it holds the bucket, else the Lease as last observed. ok is false
// when this replica has seen no Lease for the bucket.
func (m *Manager) Term(bucket int) (t Term, ok bool) {
	m.mu.Lock()
	h := m.held[bucket]
	here := h != nil && m.cfg.Clock.Now().Before(m.validUntil)
	m.mu.Unlock()
	if here {
		return termOf(h.lease, true), true
	}
	obs, ok := m.buckets.get(bucketLeaseName(bucket))
	if !ok {
		return Term{}, false
	}
	return termOf(obs.lease, false), true
}

// Holder names who delivers for bucket now as this replica sees it: this
// replica's identity while Owns, else the holder the bucket's Lease names
// while, by this replica's clock, that holder is not gone (its membership
// Lease renewed within its duration); "" when none. It is for display
// (kubectl get -o wide) and never decides a write.
func (m *Manager) Holder(bucket int) string {
	if m.Owns(bucket) {
		return m.cfg.Identity
	}
	if h := m.otherHolder(m.cfg.Clock.Now(), bucket); h != m.cfg.Identity {
		return h
	}
	return "" // a term of this replica's name it does not hold: taken back at its next pass
}

// Buckets is how many buckets Clusters hash into.
func (m *Manager) Buckets() int { return m.cfg.Buckets }

// Identity names this replica.
func (m *Manager) Identity() string { return m.cfg.Identity }

// LeaseDuration is how long a bucket's holder may go unrenewed.
func (m *Manager) LeaseDuration() time.Duration { return m.cfg.LeaseDuration }

func termOf(l *coordinationv1.Lease, here bool) Term {
	t := Term{Here: here}
	if l.Spec.HolderIdentity != nil {
		t.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		t.Transitions = *l.Spec.LeaseTransitions
	}
	return t
}

func bucketLeaseName(bucket int) string { return BucketLeasePrefix + strconv.Itoa(bucket) }

// Run takes part until ctx is done: it watches the membership and bucket
// Leases, then renews, acquires and releases in one loop. On return it has
// stopped delivery (OnChange with every held bucket), released every
// bucket and deleted its membership Lease, so that successors need not
// wait for expiry.
func (m *Manager) Run(ctx context.Context) error {
	if m.client == nil {
		return errors.New("sharding: Run needs a Manager made by New")
	}
	logger := klog.FromContext(ctx).WithValues("identity", m.cfg.Identity)
	ctx = klog.NewContext(ctx, logger)
	synced := []cache.InformerSynced{
		m.startInformer(ctx, MemberLabel, m.members),
		m.startInformer(ctx, BucketLabel, m.buckets),
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	defer m.shutdown(ctx)
	logger.Info("Taking part in sharded delivery", "namespace", m.cfg.Namespace, "buckets", m.cfg.Buckets)
	for {
		m.step(ctx)
		timer := m.cfg.Clock.NewTimer(m.nextWake())
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C():
		}
	}
}

// startInformer watches the Leases labelled label=true in the namespace
// into obs and returns its HasSynced.
func (m *Manager) startInformer(ctx context.Context, label string, obs *observer) cache.InformerSynced {
	f := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithNamespace(m.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = label + "=true" }))
	inf := f.Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(obs.handler()); err != nil {
		// Only a stopped informer refuses a handler, and this one is new.
		klog.FromContext(ctx).Error(err, "Cannot watch Leases", "label", label)
	}
	f.Start(ctx.Done())
	return inf.HasSynced
}

// nextWake is how long the loop sleeps: a retry period, or less when a
// held bucket's term ends sooner, so that it is dropped (and OnChange
// told) the moment Owns turns false.
func (m *Manager) nextWake() time.Duration {
	now := m.cfg.Clock.Now()
	wait := m.cfg.RetryPeriod
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.held) > 0 {
		if d := m.validUntil.Sub(now); d < wait {
			wait = max(d, time.Millisecond)
		}
	}
	return wait
}

// step is one pass of the loop: drop what expired, renew the membership
// Lease, hand over what this replica is no longer the desired owner of,
// take what it is.
func (m *Manager) step(ctx context.Context) {
	now := m.cfg.Clock.Now()
	lost := m.dropExpired(now)
	renewed := m.renewMember(ctx, now)
	lost = append(lost, renewed.lost...)
	lost = append(lost, m.dropTaken()...)
	members := m.members.live(now, m.cfg.LeaseDuration, m.cfg.Identity)
	toRelease := m.undesired(members)
	lost = append(lost, bucketsOf(toRelease)...)
	m.notify(nil, lost) // delivery stops here, before any release
	for _, l := range toRelease {
		m.release(ctx, l)
	}
	for _, l := range m.strays(now, members) {
		m.release(ctx, l)
	}
	gained := m.acquireDesired(ctx, now, members)
	for _, b := range renewed.regained {
		if m.holds(b) { // not handed over just now
			gained = append(gained, b)
		}
	}
	m.notify(gained, nil)
	m.updateMetrics(now)
}

// shutdown stops delivery for every held bucket, releases them and
// deletes the membership Lease, with a context of its own: ctx is done.
func (m *Manager) shutdown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.RenewDeadline)
	defer cancel()
	m.mu.Lock()
	var all []*coordinationv1.Lease
	for _, h := range m.held {
		all = append(all, h.lease)
	}
	m.dropAllLocked()
	m.mu.Unlock()
	m.notify(nil, bucketsOf(all))
	for _, l := range all {
		m.release(ctx, l)
	}
	m.deleteMember(ctx)
	m.forgetMetrics()
	klog.FromContext(ctx).Info("Left sharded delivery", "released", len(all))
}

// notify calls OnChange when there is something to say.
func (m *Manager) notify(gained, lost []int) {
	if len(gained) == 0 && len(lost) == 0 || m.cfg.OnChange == nil {
		return
	}
	sort.Ints(gained)
	sort.Ints(lost)
	m.cfg.OnChange(gained, lost)
}
