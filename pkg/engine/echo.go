package engine

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// echoFilter tells the watch events of the engine's own writes from every
// other change to a copy. The echo of a write needs no pass: that copy is
// recorded Synced already, and a pass would only find it current. Without
// it, every write cost each cluster a second pass. The echo may arrive
// before the write's response: events for a copy being written are held
// until the write returns (writing, wrote), then judged by the
// resourceVersion it got.
//
// It has its own lock and calls out to nothing while holding it:
// stillWanted (the desired set's wanted, which takes that set's lock) is
// asked after it is released, so no two of the engine's locks are ever
// held together.
type echoFilter struct {
	// stillWanted reports whether the copy copyID is still wanted by the
	// Cluster clusterKey: only the echo of such a copy is nothing to do.
	stillWanted func(clusterKey, copyID string) bool

	mu sync.Mutex
	// echoes are the resourceVersions of the engine's own last writes, by
	// echoKey: the watch event of such a write needs no pass.
	echoes map[string]echo
	// inflight holds, by echoKey, the resourceVersions of events for
	// copies being written right now (see writing).
	inflight map[string][]string
}

// echo is the engine's own last write of one copy, whose watch event is
// expected: the resourceVersion it gave the copy, and the copy's identity
// (copyID), by which changed tells whether it is still wanted.
type echo struct {
	rv     string
	copyID string
}

func newEchoFilter(stillWanted func(clusterKey, copyID string) bool) *echoFilter {
	return &echoFilter{stillWanted: stillWanted, echoes: map[string]echo{}, inflight: map[string][]string{}}
}

func echoKey(clusterKey, kind, ns, name string) string {
	return clusterKey + "|" + kind + "|" + ns + "/" + name
}

// changed judges a change to a copy in a Cluster (obj nil when one was
// deleted): whether it needs a pass over the Cluster. It does not when it
// is held (its copy is being written) or when it is the expected echo of
// a copy still wanted there.
func (f *echoFilter) changed(clusterKey string, obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if obj == nil || err != nil {
		return true
	}
	ex, held, isEcho := f.take(clusterKey, m, kindOfObject(obj))
	switch {
	case held:
		return false
	case !isEcho:
		return true
	}
	// Only the echo of a copy still wanted here is nothing to do. A copy
	// that stopped being wanted after it was written (an entry removed, a
	// source denied) needs the sweep of a whole pass, and the sweep that
	// followed may have missed it: the Cluster's watch can deliver the
	// copy late (a relist after its kube-apiserver came back), after that
	// sweep read the cache. Asked after f.mu is released: the echo is
	// taken already, and the answer depends on the desired set alone (a
	// change there that stops wanting the copy queues the Cluster itself).
	return !f.stillWanted(clusterKey, ex.copyID)
}

// take judges a change under f.mu: held when its copy is being written
// (the change is kept for wrote), else isEcho when it is the expected echo
// of the engine's last write, which it takes.
func (f *echoFilter) take(clusterKey string, m metav1.Object, kind string) (ex echo, held, isEcho bool) {
	k := echoKey(clusterKey, kind, m.GetNamespace(), m.GetName())
	f.mu.Lock()
	defer f.mu.Unlock()
	if seen, ok := f.inflight[k]; ok {
		f.inflight[k] = append(seen, m.GetResourceVersion())
		return echo{}, true, false
	}
	ex, ok := f.echoes[k]
	if !ok || ex.rv != m.GetResourceVersion() {
		return echo{}, false, false
	}
	delete(f.echoes, k)
	return ex, false, true
}

// writing marks copy c of a Cluster as being written: changed holds its
// events until wrote is called with the outcome.
func (f *echoFilter) writing(clusterKey string, c desiredCopy) {
	k := echoKey(clusterKey, c.kind, c.targetNS, c.name)
	f.mu.Lock()
	f.inflight[k] = []string{}
	f.mu.Unlock()
}

// wrote ends writing: rv is the resourceVersion the write gave the copy
// ("" when it failed). It reports whether the Cluster needs a pass: events
// held meanwhile that are all the write's own echo need nothing; any other
// does (someone else changed the copy too); with none held, the echo is
// still to come and is expected.
func (f *echoFilter) wrote(clusterKey string, c desiredCopy, rv string) bool {
	k := echoKey(clusterKey, c.kind, c.targetNS, c.name)
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := f.inflight[k]
	delete(f.inflight, k)
	other := false
	for _, s := range seen {
		other = other || s != rv
	}
	if rv != "" && len(seen) == 0 {
		f.echoes[k] = echo{rv: rv, copyID: copyID(c.helmOp, c.kind, c.targetNS, c.name)}
	}
	return other || (rv == "" && len(seen) > 0)
}

// forget drops a Cluster's expected echoes (the Cluster is gone).
func (f *echoFilter) forget(clusterKey string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.echoes {
		if strings.HasPrefix(k, clusterKey+"|") {
			delete(f.echoes, k)
		}
	}
}

// forgetEcho drops the expected echo of one copy.
func (f *echoFilter) forgetEcho(clusterKey, kind, ns, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.echoes, echoKey(clusterKey, kind, ns, name))
}
