package server

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/agentauth"
	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/apiserver"
	"github.com/courier-dev/courier/pkg/registry/memstore"
)

// TestPullDelivery checks the wiring: the agent authorizer's Deny comes
// before the delegated authorizer's Allow, its NoOpinion leaves the
// decision to the delegated one, and the payload configuration is filled.
// (The rules themselves are pkg/agentauth's tests.)
func TestPullDelivery(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &fleet.Cluster{}, 0, cache.Indexers{})
	index, err := agentauth.NewClusterIndex(informer)
	if err != nil {
		t.Fatal(err)
	}
	v := &views{agents: index, downstreamCopies: memstore.New[*courier.DownstreamCopy](), upstream: fake.NewClientset()}
	cfg := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	cfg.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	payloads, err := pullDelivery(cfg, v, "up", agentauth.DefaultAllowCacheTTL)
	if err != nil {
		t.Fatal(err)
	}
	if payloads.Sources == nil || payloads.Agents == nil || payloads.UpstreamID != "up" {
		t.Errorf("payload configuration %+v", payloads)
	}

	admin := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	attrs := func(resource string) authorizer.Attributes {
		return authorizer.AttributesRecord{User: admin, Verb: "get", ResourceRequest: true, APIGroup: courier.GroupName,
			Resource: resource, Namespace: "ws", Name: "row"}
	}
	// The informer has not synced: every downstreamcopies request is
	// refused, and that Deny comes before the delegate's Allow.
	if d, _, _ := cfg.Authorization.Authorizer.Authorize(context.Background(), attrs("downstreamcopies")); d != authorizer.DecisionDeny {
		t.Errorf("before the Clusters are read: %v, want Deny", d)
	}
	// Where the agent authorizer has no opinion, the delegate decides.
	if d, _, _ := cfg.Authorization.Authorizer.Authorize(context.Background(), attrs("fieldcopies")); d != authorizer.DecisionAllow {
		t.Errorf("fieldcopies: %v, want the delegate's Allow", d)
	}

	cfg.Authorization.Authorizer = nil
	if _, err := pullDelivery(cfg, v, "up", agentauth.DefaultAllowCacheTTL); err == nil {
		t.Error("no authorizer to delegate to: no error")
	}
}
