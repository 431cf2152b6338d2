package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
)

// setClusters replaces the engine's Clusters: c1 pushed, and c2 with
// the annotations given.
func (env *testEnv) setClusters(c2Annotations map[string]string) {
	clusters := newIndexer()
	_ = clusters.Add(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: "c1"}})
	_ = clusters.Add(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: "c2", Annotations: c2Annotations}})
	env.e.cfg.Clusters = fleetlisters.NewClusterLister(clusters)
}

// A Cluster the replicas do not push (delivery.Of,
// docs/design.md#pull-delivery) -- pulled by its agent, or delivered by
// nobody for a malformed agent annotation -- is not written: its client is
// forgotten and nothing is read, written, swept or recorded there, while
// the pushed Cluster next to it is written. A status recorded by a push
// pass before is dropped, and the view told. An empty annotation names
// no agent: that Cluster is pushed, as the first pass shows.
func TestPulledClusterNotPushed(t *testing.T) {
	for name, agent := range map[string]string{"pulled": "agent-c2", "nobody, white space": " agent-c2", "nobody, anonymous": "system:anonymous"} {
		t.Run(name, func(t *testing.T) { testNotPushed(t, agent) })
	}
}

func testNotPushed(t *testing.T, agent string) {
	down := newFakeCluster(true)
	env := newEnv(t, down, srcSecret("db", "7"), srcConfigMap("settings", "9"))
	env.setClusters(map[string]string{courier.AnnotationAgentUser: ""})
	r1 := row("ConfigMap", "settings", "9", courier.CopyPhasePending)
	r2 := rowFor(appOp.Name, "c2", "Secret", "db", "7", courier.CopyPhasePending)
	env.setDesired(r1, r2)
	drain(env.e.queue)
	if err := env.e.reconcileCluster(env.ctx, fleetNS+"/c2"); err != nil {
		t.Fatal(err)
	}
	if st := env.mustStatus(r2); st.Phase != courier.CopyPhaseSynced {
		t.Fatalf("c2 while pushed (an empty agent annotation): %+v, want Synced", st)
	}

	env.setClusters(map[string]string{courier.AnnotationAgentUser: agent})
	down.kube.ClearActions()
	env.ds.gets, env.changes = 0, nil
	if err := env.e.reconcileCluster(env.ctx, fleetNS+"/c2"); err != nil {
		t.Fatal(err)
	}
	if got := env.downActions(); len(got) != 0 {
		t.Errorf("c2 not pushed: downstream requests %q, want none", got)
	}
	if env.ds.gets != 0 || !slices.Equal(env.ds.forgotten, []string{fleetNS + "/c2"}) {
		t.Errorf("c2 not pushed: %d client gets, forgotten %q; want none and c2 forgotten", env.ds.gets, env.ds.forgotten)
	}
	if st, ok := env.status(r2); ok {
		t.Errorf("c2 not pushed keeps a push status: %+v", st)
	}
	if len(env.changes) != 1 || !slices.Equal(env.changes[0].Rows, []string{keyOf(r2)}) {
		t.Errorf("status changes %+v, want c2's row", env.changes)
	}

	// The positive control: c1, pushed, is written beside it.
	if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
		t.Fatal(err)
	}
	if findAction(down.kube.Actions(), "create", "configmaps") == nil {
		t.Errorf("pushed c1: no create; requests %q", env.downActions())
	}
	if st := env.mustStatus(r1); st.Phase != courier.CopyPhaseSynced {
		t.Errorf("pushed c1: %+v, want Synced", st)
	}
}

// recordingReader is a SourceReader that answers from objs and records
// what it was asked.
type recordingReader struct {
	objs  map[string]runtime.Object // by name
	asked []Source
}

func (r *recordingReader) Read(_ context.Context, src Source) (runtime.Object, error) {
	r.asked = append(r.asked, src)
	return r.objs[src.Name], nil
}

// A SourceReader in Config replaces the upstream GETs, and is told the
// row a copy is for; the engine's copy is made from what it returns.
func TestConfigSources(t *testing.T) {
	down := newFakeCluster(true)
	env := newEnv(t, down)
	reader := &recordingReader{objs: map[string]runtime.Object{"db": srcSecret("db", "7")}}
	env.e.sources = newSourceCache(reader)
	r := row("Secret", "db", "7", courier.CopyPhasePending)
	if err := env.reconcile(r); err != nil {
		t.Fatal(err)
	}
	want := []Source{{Kind: "Secret", Namespace: fleetNS, Name: "db", Row: keyOf(r)}}
	if !slices.Equal(reader.asked, want) {
		t.Errorf("reader asked %+v, want %+v", reader.asked, want)
	}
	if got := env.upActions(); len(got) != 0 {
		t.Errorf("upstream requests %q, want none", got)
	}
	if _, ok := down.secret(targetNS, "db"); !ok {
		t.Error("no copy written from the reader's object")
	}
}

// A source the upstream read refuses as never exported (the view had not
// caught up yet) is written nowhere: the row is Denied, with the rule's
// message, and retried.
func TestGuardedSourceIsNotWritten(t *testing.T) {
	down := newFakeCluster(true)
	secret := srcSecret("db", "7")
	secret.Annotations = map[string]string{exportpolicy.AnnotationExport: "false"}
	env := newEnv(t, down, secret, srcSecret("other", "3"))
	env.e.sources = newSourceCache(UpstreamSources{Client: env.upstream, Guard: exportpolicy.New(true, nil).Guard})
	denied, allowed := row("Secret", "db", "7", courier.CopyPhasePending), row("Secret", "other", "3", courier.CopyPhasePending)
	if err := env.reconcile(denied, allowed); err == nil {
		t.Error("a pass with a denied source reported no error to retry")
	}
	if _, ok := down.secret(targetNS, "other"); !ok {
		t.Fatal("positive control: the allowed source was not copied")
	}
	if _, ok := down.secret(targetNS, "db"); ok {
		t.Error("the denied source was copied")
	}
	st := env.mustStatus(denied)
	if st.Phase != courier.CopyPhaseDenied || !strings.Contains(st.Message, `annotated courier.dev/export: "false"`) {
		t.Errorf("status %s %q, want Denied naming the annotation", st.Phase, st.Message)
	}
}
