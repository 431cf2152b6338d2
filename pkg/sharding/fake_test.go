package sharding

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	testclock "k8s.io/utils/clock/testing"
)

var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// fakeLeases is a Lease store with what the Manager relies on from the
// API server: resourceVersions, create conflicts, update preconditions.
// After each write it tells every subscribed Manager, like a perfect
// informer would. Methods the Manager does not call panic (nil embedded
// interface).
type fakeLeases struct {
	coordinationv1client.LeaseInterface

	mu     sync.Mutex
	rv     int
	byName map[string]*coordinationv1.Lease
	subs   []*Manager
	// fail, when set, fails every call with it (the upstream unreachable).
	fail error
	// writes counts successful writes by Lease name; updates counts every
	// update asked for, failed or not.
	writes  map[string]int
	updates int
	// beforeUpdate, when set, runs at the start of every Update, outside
	// the lock (a slow upstream: the test advances the clock in it).
	beforeUpdate func(name string)
}

func newFakeLeases() *fakeLeases {
	return &fakeLeases{byName: map[string]*coordinationv1.Lease{}, writes: map[string]int{}}
}

func (f *fakeLeases) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	l, ok := f.byName[name]
	if !ok {
		return nil, apierrors.NewNotFound(leasesResource, name)
	}
	return l.DeepCopy(), nil
}

func (f *fakeLeases) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	if f.fail != nil {
		f.mu.Unlock()
		return nil, f.fail
	}
	if _, ok := f.byName[l.Name]; ok {
		f.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(leasesResource, l.Name)
	}
	return f.store(l)
}

func (f *fakeLeases) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if f.beforeUpdate != nil {
		f.beforeUpdate(l.Name)
	}
	f.mu.Lock()
	f.updates++
	if f.fail != nil {
		f.mu.Unlock()
		return nil, f.fail
	}
	old, ok := f.byName[l.Name]
	if !ok {
		f.mu.Unlock()
		return nil, apierrors.NewNotFound(leasesResource, l.Name)
	}
	if l.ResourceVersion != old.ResourceVersion {
		f.mu.Unlock()
		return nil, apierrors.NewConflict(leasesResource, l.Name, nil)
	}
	return f.store(l)
}

// store saves l with a new resourceVersion (f.mu held; it unlocks) and
// tells the subscribers.
func (f *fakeLeases) store(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	f.rv++
	saved := l.DeepCopy()
	saved.ResourceVersion = strconv.Itoa(f.rv)
	f.byName[l.Name] = saved
	f.writes[l.Name]++
	subs := f.subs
	f.mu.Unlock()
	for _, m := range subs {
		m.observerFor(saved).observe(saved.DeepCopy())
	}
	return saved.DeepCopy(), nil
}

func (f *fakeLeases) Delete(_ context.Context, name string, _ metav1.DeleteOptions) error {
	f.mu.Lock()
	if f.fail != nil {
		f.mu.Unlock()
		return f.fail
	}
	l, ok := f.byName[name]
	if !ok {
		f.mu.Unlock()
		return apierrors.NewNotFound(leasesResource, name)
	}
	delete(f.byName, name)
	subs := f.subs
	f.mu.Unlock()
	for _, m := range subs {
		m.observerFor(l).forget(name)
	}
	return nil
}

// holder returns the holderIdentity stored for name ("" when none).
func (f *fakeLeases) holder(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.byName[name]; ok && l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}

// observerFor returns which of m's observers watches l.
func (m *Manager) observerFor(l *coordinationv1.Lease) *observer {
	if l.Labels[MemberLabel] == "true" {
		return m.members
	}
	return m.buckets
}

// testConfig is the defaults with a fake clock and OnChange recording.
type recorder struct {
	mu     sync.Mutex
	gained [][]int
	lost   [][]int
	// onLost, when set, runs inside OnChange for lost buckets (to check
	// what the store holds at that moment).
	onLost func(lost []int)
}

func (r *recorder) onChange(gained, lost []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(gained) > 0 {
		r.gained = append(r.gained, gained)
	}
	if len(lost) > 0 {
		r.lost = append(r.lost, lost)
		if r.onLost != nil {
			r.onLost(lost)
		}
	}
}

// newTestManager makes a Manager named id on store, subscribed to it.
func newTestManager(t *testing.T, store *fakeLeases, clk *testclock.FakeClock, id string, r *recorder) *Manager {
	t.Helper()
	cfg := Config{Namespace: "courier-system", Identity: id, Clock: clk}
	if r != nil {
		cfg.OnChange = r.onChange
	}
	m, err := newManager(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.subs = append(store.subs, m)
	// Like an informer's initial list: everything stored is seen now.
	var existing []*coordinationv1.Lease
	for _, l := range store.byName {
		existing = append(existing, l.DeepCopy())
	}
	store.mu.Unlock()
	for _, l := range existing {
		m.observerFor(l).observe(l)
	}
	return m
}

// advance moves the clock by d.
func advance(clk *testclock.FakeClock, d time.Duration) { clk.SetTime(clk.Now().Add(d)) }
