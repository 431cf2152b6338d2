package clusterstatus

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

var appOwner = types.NamespacedName{Namespace: "ws", Name: "app"}

// keptIn is owner's copy of Secret name kept in Cluster edge1.
func keptIn(owner types.NamespacedName, name string) copycontract.Leftover {
	return copycontract.Leftover{HelmOp: owner, Cluster: edge1.Name, Kind: "Secret", Name: name, TargetNamespace: "apps",
		Keep: true, SyncedResourceVersion: "7", Phase: courier.CopyPhaseKept, Message: "stays"}
}

// takeOwner waits for the next owner OnLeftovers is told of.
func (f *fixture) takeOwner(what string) types.NamespacedName {
	f.t.Helper()
	select {
	case o := <-f.owners:
		return o
	case <-time.After(10 * time.Second):
		f.t.Fatalf("%s: no owner told", what)
		return types.NamespacedName{}
	}
}

func TestPublishedLeftoversRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	other := types.NamespacedName{Namespace: "ws", Name: "bundle:b"}
	left := []copycontract.Leftover{keptIn(appOwner, "db"), keptIn(other, "tls")}
	f.store.Publish(edge1, tenRows("1"), left)
	f.waitReport("the first publish", func(r *Report) bool { return len(r.Leftovers) == 2 })
	cm := f.object()
	if _, ok := cm.Data[LeftoversKey]; !ok {
		t.Fatalf("no %s key in %v", LeftoversKey, cm.Data)
	}
	if got, _ := decode(cm); len(got.Rows) != 10 || !sameLeftovers(got.Leftovers, left) {
		t.Errorf("decoded %d rows and leftovers %+v, want 10 and %+v", len(got.Rows), got.Leftovers, left)
	}
	if got := f.store.Leftovers(appOwner); len(got) != 1 || got[0] != left[0] {
		t.Errorf("Leftovers(app) = %+v, want %+v", got, left[:1])
	}
	told := map[types.NamespacedName]bool{f.takeOwner("first"): true, f.takeOwner("second"): true}
	if !told[appOwner] || !told[other] {
		t.Errorf("owners told %v, want both", told)
	}
	if n := f.writes.Load(); n != 1 {
		t.Fatalf("%d writes, want 1", n)
	}

	// The first write's queue can outlive the informer's sight of the
	// object (as in TestPublishWritesOnChangeOnly): wait for it first.
	f.waitQueueGone()

	// The same rows and leftovers again, then rows with leftovers unknown
	// (nil: not swept yet): no write, nothing queued.
	f.store.Publish(edge1, tenRows("1"), []copycontract.Leftover{keptIn(appOwner, "db"), keptIn(other, "tls")})
	f.store.Publish(edge1, tenRows("1"), nil)
	f.store.wmu.Lock()
	queued := f.store.queues[edge1] != nil
	f.store.wmu.Unlock()
	if queued {
		t.Error("publishing what is upstream queued a write")
	}

	// One owner's leftover goes: one write, that owner told, the other not.
	f.store.Publish(edge1, tenRows("1"), left[1:])
	f.waitReport("the leftover gone", func(r *Report) bool { return len(r.Leftovers) == 1 })
	if o := f.takeOwner("a leftover gone"); o != appOwner {
		t.Errorf("told %v, want %v", o, appOwner)
	}
	if got := f.store.Leftovers(appOwner); len(got) != 0 {
		t.Errorf("Leftovers(app) after it went = %+v", got)
	}
	if n := f.writes.Load(); n != 2 {
		t.Errorf("%d writes, want 2", n)
	}

	// The object deleted: the index forgets it.
	if err := f.client.CoreV1().ConfigMaps(ns).Delete(context.Background(), ObjectName(edge1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if o := f.takeOwner("the object deleted"); o != other {
		t.Errorf("told %v, want %v", o, other)
	}
	if got := f.store.Leftovers(other); len(got) != 0 {
		t.Errorf("Leftovers(bundle:b) after the object went = %+v", got)
	}
	select {
	case o := <-f.owners:
		t.Errorf("told %v, which did not change", o)
	default:
	}
}

func TestAgentReportDropsLeftovers(t *testing.T) {
	f := newFixture(t, nil)
	f.store.Publish(edge1, nil, []copycontract.Leftover{keptIn(appOwner, "db")})
	f.waitReport("the publish", func(r *Report) bool { return len(r.Leftovers) == 1 })
	// The Cluster is pulled now: its agent's report holds no leftovers.
	f.record("app.edge1.secret.s0", courier.CopyPhaseSynced, 30*time.Second)
	r := f.waitReport("the agent's report", func(r *Report) bool { return len(r.Rows) == 1 })
	if len(r.Leftovers) != 0 || f.object().Data[LeftoversKey] != "" {
		t.Errorf("an agent's report kept the leftovers: %+v", r.Leftovers)
	}
}

func TestDecodeLeftoversSkipsOtherClusters(t *testing.T) {
	l := keptIn(appOwner, "db")
	foreign := l
	foreign.Cluster = "edge2"
	otherNS := l
	otherNS.HelmOp.Namespace = "elsewhere"
	v, err := encodeLeftovers([]copycontract.Leftover{l, foreign, otherNS}, MaxMessageBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeLeftovers(edge1, v); len(got) != 1 || got[0] != l {
		t.Errorf("decoded %+v, want only %+v", got, l)
	}
}
