package resources

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func baseResources() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "secrets", SingularName: "secret", Kind: "Secret", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
			{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", ShortNames: []string{"ns"}, Verbs: []string{"get"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", SingularName: "deployment", Kind: "Deployment", Namespaced: true, ShortNames: []string{"deploy"}, Verbs: []string{"get", "list", "watch"}},
		}},
	}
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newTestResolver() (*Resolver, *fakediscovery.FakeDiscovery, *clock) {
	fake := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: baseResources()}}
	r := NewResolver(fake, 5*time.Second)
	c := &clock{now: time.Unix(1000, 0)}
	r.now = c.Now
	return r, fake, c
}

func TestResolve(t *testing.T) {
	secret := Resolved{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespaced: true}
	deploy := Resolved{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespaced: true}
	ns := Resolved{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}}
	r, _, _ := newTestResolver()
	for _, tc := range []struct {
		spec    string
		want    Resolved
		wantErr string
	}{
		{spec: "secret", want: secret},
		{spec: "secrets", want: secret},
		{spec: "Secret", want: secret},
		{spec: "secrets.v1.", wantErr: "empty part"},
		{spec: "deployment", want: deploy},
		{spec: "deployments", want: deploy},
		{spec: "Deployment", want: deploy},
		{spec: "deploy", want: deploy},
		{spec: "deployments.v1.apps", want: deploy},
		{spec: "deployment.v1.apps", want: deploy},
		{spec: "deployments.apps", want: deploy},
		{spec: "namespace", want: ns},
		{spec: "ns", want: ns},
		{spec: "deployments.v2.apps", wantErr: "not served"},
		{spec: "widgets", wantErr: "not served"},
		{spec: "", wantErr: "empty resource name"},
		{spec: "apps/deployments", wantErr: "want RESOURCE[.VERSION[.GROUP]]"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := r.Resolve(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve(%q) = %+v, %v; want error containing %q", tc.spec, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			}
		})
	}
}

// TestResolveLateResource checks that a resource added to discovery after
// the first lookup (a CRD installed after start) resolves once the
// rate-limit interval has passed, and not before: a stream of unknown names
// must not refresh discovery on every call.
func TestResolveLateResource(t *testing.T) {
	r, fake, clk := newTestResolver()
	if _, err := r.Resolve("federatedsecret"); err == nil {
		t.Fatal("federatedsecret resolved before it exists")
	}
	fake.Resources = append(fake.Resources, &metav1.APIResourceList{
		GroupVersion: "example.dev/v1",
		APIResources: []metav1.APIResource{{Name: "federatedsecrets", SingularName: "federatedsecret", Kind: "FederatedSecret", Namespaced: true}},
	})
	clk.now = clk.now.Add(time.Second)
	if _, err := r.Resolve("federatedsecret"); err == nil {
		t.Fatal("discovery was refreshed again within the rate-limit interval")
	}
	clk.now = clk.now.Add(5 * time.Second)
	got, err := r.Resolve("FederatedSecret")
	if err != nil {
		t.Fatalf("after the interval: %v", err)
	}
	want := schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "federatedsecrets"}
	if got.GVR != want || !got.Namespaced || got.GVK.Kind != "FederatedSecret" {
		t.Fatalf("got %+v, want %v namespaced", got, want)
	}
}
