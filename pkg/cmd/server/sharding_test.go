package server

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleetv1alpha1 "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	fleetfake "github.com/courier-dev/courier/pkg/generated/clientset/versioned/fake"
	fleetinformers "github.com/courier-dev/courier/pkg/generated/informers/externalversions"
	"github.com/courier-dev/courier/pkg/sharding"
)

// The downstream user agent names the replica with sharding, and each
// write's bound is half the margin between lease and renew deadline.
func TestShardOptionsDerived(t *testing.T) {
	s := defaultShardOptions()
	s.Identity = "courier-7d9f-abc"
	if got := s.userAgent(); got != "courier/courier-7d9f-abc" {
		t.Errorf("userAgent = %q", got)
	}
	if got := s.writeTimeout(); got != 2500*time.Millisecond {
		t.Errorf("writeTimeout = %s, want 2.5s with the defaults", got)
	}
	s.Buckets = 0
	if got := s.userAgent(); got != "courier" {
		t.Errorf("userAgent with sharding off = %q", got)
	}
}

// DELIVERED-BY: agent for a pulled Cluster; with sharding the holder of
// the bucket as this replica sees it (none before any Lease is seen);
// leader without sharding.
func TestDeliveredBy(t *testing.T) {
	fc := fleetfake.NewSimpleClientset()
	f := fleetinformers.NewSharedInformerFactory(fc, 0)
	clusters := f.Fleet().V1alpha1().Clusters().Informer().GetIndexer()
	_ = clusters.Add(&fleetv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "edge",
		Annotations: map[string]string{courier.AnnotationAgentUser: "agent-edge"}}})
	_ = clusters.Add(&fleetv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "pushed"}})
	_ = clusters.Add(&fleetv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "blank",
		Annotations: map[string]string{courier.AnnotationAgentUser: ""}}})
	_ = clusters.Add(&fleetv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "spaced",
		Annotations: map[string]string{courier.AnnotationAgentUser: "agent-spaced "}}})
	v := &views{fleetInformers: f}
	for cluster, want := range map[string]string{"edge": "agent", "pushed": "leader", "blank": "leader", "spaced": "<none>", "gone": "<none>"} {
		if got := v.deliveredBy("fleet-default", cluster); got != want {
			t.Errorf("without sharding, Cluster %s: %q, want %q", cluster, got, want)
		}
	}
	m, err := sharding.New(kubefake.NewClientset(), sharding.Config{Namespace: "courier-system", Identity: "courier-0"})
	if err != nil {
		t.Fatal(err)
	}
	v.shards = m
	if got := v.deliveredBy("fleet-default", "pushed"); got != "<none>" {
		t.Errorf("no bucket Lease seen: %q, want <none>", got)
	}
}
