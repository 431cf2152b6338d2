package rows

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned/fake"
)

const ns = "fleet-default"

// row is a row as Courier serves it: labelled delivered unless it is a
// leftover (Kept, Deleting) or Denied.
func row(helmOp, cluster, kind, name, rv string, phase v1alpha1.CopyPhase) *v1alpha1.DownstreamCopy {
	deliver := phase != v1alpha1.CopyPhaseKept && phase != v1alpha1.CopyPhaseDeleting && phase != v1alpha1.CopyPhaseDenied
	return &v1alpha1.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(helmOp + "." + cluster + "." + kind + "." + name),
			Labels: map[string]string{courier.LabelDeliver: strconv.FormatBool(deliver)}},
		Spec: v1alpha1.DownstreamCopySpec{HelmOp: helmOp, Cluster: cluster,
			Source: v1alpha1.CopySource{Kind: kind, Name: name, ResourceVersion: rv},
			Target: v1alpha1.CopyTarget{Namespace: "apps", Name: name}},
		Status: v1alpha1.DownstreamCopyStatus{Phase: phase},
	}
}

// fakeDesired records what the engine is told, in order.
type fakeDesired struct {
	mu    sync.Mutex
	calls []string // "<op>: <row> <row>" or "complete"
	rows  map[string]*courier.DownstreamCopy
}

func (f *fakeDesired) SetDesired(op types.NamespacedName, rows []*courier.DownstreamCopy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
		f.rows[r.Name] = r
	}
	sort.Strings(names)
	f.calls = append(f.calls, op.String()+": "+strings.Join(names, " "))
}

func (f *fakeDesired) DesiredComplete() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "complete")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The agent's rows reach the engine one HelmOp at a time, every HelmOp
// before DesiredComplete: only its own Cluster's, without the leftovers
// the view shows (Kept, Deleting), with ServiceAccounts in the agent's
// namespace. A Denied row is handed over too (the engine removes its copy
// and looks for Fleet's), but has no payload to read. The watch selects
// spec.cluster, as Courier requires. The deliver label decides what is
// delivered: a row labelled not delivered that is not Denied is dropped.
func TestHandOver(t *testing.T) {
	withSA := row("other", "edge2", "Secret", "x", "3", v1alpha1.CopyPhasePending)
	withSA.Spec.ServiceAccount = "cattle-fleet-system/deployer"
	undelivered := row("app", "edge2", "Secret", "label-only", "4", v1alpha1.CopyPhasePending)
	undelivered.Labels[courier.LabelDeliver] = "false"
	client := fake.NewSimpleClientset(
		row("app", "edge2", "Secret", "db", "7", v1alpha1.CopyPhaseSynced),
		row("app", "edge2", "ConfigMap", "settings", "9", v1alpha1.CopyPhasePending),
		row("app", "edge2", "Secret", "old", "5", v1alpha1.CopyPhaseKept),
		row("app", "edge2", "Secret", "going", "5", v1alpha1.CopyPhaseDeleting),
		row("app", "edge2", "Secret", "kubeconfig", "6", v1alpha1.CopyPhaseDenied),
		undelivered,
		row("app", "edge1", "Secret", "db", "7", v1alpha1.CopyPhaseSynced), // another Cluster's (the fake ignores field selectors)
		withSA,
	)
	var mu sync.Mutex
	var selectors []string
	client.PrependReactor("list", "downstreamcopies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		selectors = append(selectors, a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	c, err := New(client, ns, "edge2", "agents")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("rows did not sync")
	}
	mu.Lock()
	if !slices.Equal(selectors, []string{"spec.cluster=edge2"}) {
		t.Errorf("lists selected %q, want spec.cluster=edge2", selectors)
	}
	mu.Unlock()
	if got, want := c.Copyable(), []string{ns + "/app.edge2.configmap.settings", ns + "/app.edge2.secret.db", ns + "/other.edge2.secret.x"}; !slices.Equal(got, want) {
		t.Errorf("copyable %q, want %q", got, want)
	}

	d := &fakeDesired{rows: map[string]*courier.DownstreamCopy{}}
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, d) }()
	waitFor(t, "the first hand-over", func() bool { return slices.Contains(d.take0(), "complete") })
	calls := d.take0()
	first := calls[:slices.Index(calls, "complete")]
	sort.Strings(first)
	want := []string{"fleet-default/app: app.edge2.configmap.settings app.edge2.secret.db app.edge2.secret.kubeconfig", "fleet-default/other: other.edge2.secret.x"}
	if !slices.Equal(first, want) {
		t.Errorf("before DesiredComplete the engine was told %q, want %q", first, want)
	}
	if sa := d.rows["other.edge2.secret.x"].Spec.ServiceAccount; sa != "agents/deployer" {
		t.Errorf("ServiceAccount %q, want agents/deployer", sa)
	}

	// A deleted row: its HelmOp is handed over again, without it.
	gvr := v1alpha1.SchemeGroupVersion.WithResource("downstreamcopies")
	if err := client.Tracker().Delete(gvr, ns, "app.edge2.secret.db"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the HelmOp handed over without the deleted row", func() bool {
		return slices.Contains(d.take0(), "fleet-default/app: app.edge2.configmap.settings app.edge2.secret.kubeconfig")
	})
	cancel()
	<-done
}

// take0 returns the calls so far without taking them.
func (f *fakeDesired) take0() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
