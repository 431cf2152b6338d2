package memstore

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

func TestResourceVersion(t *testing.T) {
	s := New[*courier.DownstreamCopy](WithInitialResourceVersion(100))
	if got := s.ResourceVersion(); got != 100 {
		t.Errorf("empty store: %d, want 100", got)
	}
	row := func(name string) *courier.DownstreamCopy {
		return &courier.DownstreamCopy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	s.Upsert(row("a"), row("b"))
	s.Upsert(row("a")) // unchanged: no new version
	if got := s.ResourceVersion(); got != 102 {
		t.Errorf("after two objects: %d, want 102", got)
	}
	s.Delete(Key{Namespace: "ns", Name: "a"})
	if got := s.ResourceVersion(); got != 103 {
		t.Errorf("after a delete: %d, want 103", got)
	}
}
