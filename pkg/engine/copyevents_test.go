package engine

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Changes reported to a CopyEvents before an engine is bound to it reach
// the engine when New binds it, one pass per Cluster; later ones reach it
// as they come.
func TestCopyEventsBeforeAndAfterBinding(t *testing.T) {
	events := &CopyEvents{}
	copyOf := &corev1.Secret{}
	copyOf.Namespace, copyOf.Name, copyOf.ResourceVersion = targetNS, "db", "1"
	events.CopyChanged("fleet-default/c1", copyOf)
	events.CopyChanged("fleet-default/c1", nil)
	events.CopyChanged("fleet-default/c2", copyOf)

	e := New(Config{CopyEvents: events})
	if got, want := drain(e.queue), []string{"fleet-default/c1", "fleet-default/c2"}; !slices.Equal(got, want) {
		t.Errorf("queued on binding %v, want %v", got, want)
	}
	e.scopes.mu.Lock()
	scope := e.scopes.scopes["fleet-default/c1"]
	e.scopes.mu.Unlock()
	if scope == nil || !scope.whole {
		t.Errorf("a Cluster changed before binding is owed %+v, want a whole pass", scope)
	}

	events.CopyChanged("fleet-default/c3", nil)
	if got, want := drain(e.queue), []string{"fleet-default/c3"}; !slices.Equal(got, want) {
		t.Errorf("queued after binding %v, want %v", got, want)
	}
}

// A CopyEvents serves one engine.
func TestCopyEventsBoundTwice(t *testing.T) {
	events := &CopyEvents{}
	New(Config{CopyEvents: events})
	defer func() {
		if recover() == nil {
			t.Errorf("binding a second engine did not panic")
		}
	}()
	New(Config{CopyEvents: events})
}
