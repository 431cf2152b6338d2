package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The echoFilter alone, with the Engine's wanted set replaced by a set of
// its own: the cases of echo_test.go without an Engine around it.

const filterCluster = "fleet-default/c1"

var filterCopy = desiredCopy{helmOp: appOp, kind: "Secret", targetNS: targetNS, name: "db"}

func filterCopyAt(rv string) *corev1.Secret {
	s := &corev1.Secret{}
	s.Namespace, s.Name, s.ResourceVersion = targetNS, "db", rv
	return s
}

// newTestFilter returns a filter whose copies are wanted while *wanted.
func newTestFilter(wanted *bool) *echoFilter {
	return newEchoFilter(func(clusterKey, id string) bool {
		return *wanted && clusterKey == filterCluster && id == copyID(filterCopy.helmOp, filterCopy.kind, filterCopy.targetNS, filterCopy.name)
	})
}

// An expected echo is nothing to do, once; any other change needs a pass.
func TestEchoFilterOwnWrites(t *testing.T) {
	wanted := true
	sameNameConfigMap := &corev1.ConfigMap{}
	sameNameConfigMap.Namespace, sameNameConfigMap.Name, sameNameConfigMap.ResourceVersion = targetNS, "db", "42"
	steps := []struct {
		name    string
		expect  bool
		cluster string
		obj     runtime.Object
		pass    bool
	}{
		{"the echo of the engine's own write", true, filterCluster, filterCopyAt("42"), false},
		{"the same event again (a relist re-delivers it)", false, filterCluster, filterCopyAt("42"), true},
		{"a later change by someone else", true, filterCluster, filterCopyAt("420"), true},
		{"a ConfigMap of the same name and resourceVersion", true, filterCluster, sameNameConfigMap, true},
		{"the copy as another Cluster sees it", true, "fleet-default/c2", filterCopyAt("42"), true},
		{"a deletion", true, filterCluster, nil, true},
	}
	f := newTestFilter(&wanted)
	for _, s := range steps {
		if s.expect {
			f.forgetEcho(filterCluster, "Secret", targetNS, "db")
			f.writing(filterCluster, filterCopy)
			if f.wrote(filterCluster, filterCopy, "42") {
				t.Fatalf("%s: a write with nothing seen asked for a pass", s.name)
			}
		}
		if got := f.changed(s.cluster, s.obj); got != s.pass {
			t.Errorf("%s: pass=%t, want %t", s.name, got, s.pass)
		}
	}
}

// Events for a copy being written are held and judged by the
// resourceVersion the write got.
func TestEchoFilterBeforeResponse(t *testing.T) {
	wanted := true
	cases := []struct {
		name   string
		events []string
		got    string
		after  []string
		pass   bool
	}{
		{name: "the echo first, then the response", events: []string{"42"}, got: "42"},
		{name: "the response first, then the echo", got: "42", after: []string{"42"}},
		{name: "positive control: another change while writing", events: []string{"41"}, got: "42", pass: true},
		{name: "the echo and a later change", events: []string{"42", "43"}, got: "42", pass: true},
		{name: "an event, and the write failed", events: []string{"41"}, got: "", pass: true},
		{name: "a failed write, nothing seen", got: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFilter(&wanted)
			f.writing(filterCluster, filterCopy)
			for _, rv := range tc.events {
				if f.changed(filterCluster, filterCopyAt(rv)) {
					t.Fatalf("an event asked for a pass while the write was in flight")
				}
			}
			pass := f.wrote(filterCluster, filterCopy, tc.got)
			for _, rv := range tc.after {
				pass = f.changed(filterCluster, filterCopyAt(rv)) || pass
			}
			if pass != tc.pass {
				t.Errorf("pass=%t, want %t", pass, tc.pass)
			}
		})
	}
}

// The echo of a copy no longer wanted needs a pass; forget drops a
// Cluster's expected echoes.
func TestEchoFilterNoLongerWantedAndForget(t *testing.T) {
	wanted := false
	f := newTestFilter(&wanted)
	f.wrote(filterCluster, filterCopy, "42")
	if !f.changed(filterCluster, filterCopyAt("42")) {
		t.Errorf("the echo of a copy no longer wanted asked for no pass")
	}
	wanted = true
	f.wrote(filterCluster, filterCopy, "42")
	f.forget(filterCluster)
	if !f.changed(filterCluster, filterCopyAt("42")) {
		t.Errorf("an echo forgotten with its Cluster asked for no pass")
	}
}
