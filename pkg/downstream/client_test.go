package downstream

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// NewClient builds from a rest.Config the client a Cache builds from a
// kubeconfig Secret: the same selector, informers and OnChange, with the
// Options' timeout and user agent on a copy of the config.
func TestNewClient(t *testing.T) {
	fk := &fakes{}
	var mu sync.Mutex
	var changed []string
	onChange := func(key string, obj runtime.Object) {
		mu.Lock()
		defer mu.Unlock()
		changed = append(changed, key)
	}
	in := &rest.Config{Host: "https://local"}
	c1 := cluster("fleet-default", "c1", "", "")
	cl, err := NewClient(c1, in, Options{WatchSelector: managed, NewClientset: fk.newClientset, OnChange: onChange, UserAgent: "courier-agent"})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Key != "fleet-default/c1" || cl.Selector != managed(c1).String() {
		t.Errorf("key %q selector %q", cl.Key, cl.Selector)
	}
	if cl.Config.Timeout != 10*time.Second || cl.Config.UserAgent != "courier-agent" || in.Timeout != 0 || in.UserAgent != "" {
		t.Errorf("config timeout %s agent %q; given config changed: %+v", cl.Config.Timeout, cl.Config.UserAgent, in)
	}
	waitFor(t, "the informers to sync", cl.HasSynced)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db",
		Labels: map[string]string{"courier.dev/managed-by": "courier", "for": "c1"}}}
	if _, err := cl.Kube.CoreV1().Secrets("apps").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OnChange for the copy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(changed) > 0 && changed[0] == "fleet-default/c1"
	})
	waitFor(t, "the copy in the lister", func() bool {
		_, err := cl.Secrets.Secrets("apps").Get("db")
		return err == nil
	})
	cl.Stop()
	waitDone(t, cl)
}

// Without a selector NewClient refuses: watching every Secret of a cluster
// would cache other people's data.
func TestNewClientRequiresSelector(t *testing.T) {
	if _, err := NewClient(cluster("ns", "c", "", ""), &rest.Config{Host: "https://x"}, Options{}); err == nil {
		t.Error("NewClient without WatchSelector succeeded")
	}
}
