package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/test/fleetsim"
)

const kills = 3

// inFlightAtKill bounds the writes a killed Courier had sent and the
// kube-apiserver still carried out after the kill's snapshot: the
// default --copy-workers (16) Clusters, each writing four copies at once.
const inFlightAtKill = 16 * 4

func isConflict(err error) bool { return apierrors.IsConflict(err) }

// testKill is scenario 1: the fleet's sources all change, Courier is
// SIGKILLed after some but not all of the new copies arrived (seen by
// watch), started again, three times; the second round also removes one
// entry from the HelmOp. Then every copy must be present and equal to its
// source, no copy of the removed entry left, no object Courier does not
// own changed, and every write after the last restart must be to a copy
// that was stale when Courier died.
func testKill(t *testing.T, f *fleetRun) {
	ctx := context.Background()
	f.setup(t)
	foreign := f.createForeign(t)
	occ := f.occupy(t)
	removed := f.listed[len(f.listed)-1]

	var stale map[string]bool
	var restarted time.Time
	for round := 1; round <= kills; round++ {
		value := fmt.Sprintf("k%d", round)
		if round == 2 {
			f.setListed(t, f.listed[:len(f.listed)-1])
		}
		total := f.n * len(f.listed)
		threshold := total/10 + rand.IntN(total/2)
		fired := make(chan struct{})
		var once sync.Once
		count := 0
		f.w.OnArrival(func(k fleetsim.ArrivalKey) {
			if k.Value == value && strings.HasPrefix(k.NS, "chaos-c") && k.Name != removed {
				if count++; count >= threshold {
					once.Do(func() { close(fired) })
				}
			}
		})
		f.change(t, value)
		select {
		case <-fired:
		case <-time.After(f.budget()):
			t.Fatalf("round %d: %d of %d copies arrived within %s, never the %d to kill at\n%s", round, count, total, f.budget(), threshold, fleetsim.RowsSummary(f.fc, workspace))
		}
		pid := courier.Pid()
		courier.Kill()
		f.w.OnArrival(nil)
		current, st := f.snapshot(t, value, removed)
		results.add(t, "1 kill", fmt.Sprintf("kill %d: copies current when SIGKILLed (pid %d)", round, pid),
			fmt.Sprintf("%d of %d (killed at the %d-th arrival)", current, total, threshold), "some, not all", current > 0 && current < total)
		stale = st
		restarted = time.Now()
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		err := courier.Start(sctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: starting Courier again: %v", round, err)
		}
	}
	value := fmt.Sprintf("k%d", kills)
	lat := f.converge(t, value, restarted)
	results.add(t, "1 kill", "last copy after the last restart began", fleetsim.MaxDuration(lat).Round(100*time.Millisecond).String(), "", true)
	f.waitGone(t, removed)

	missing, staleCopies, orphans := f.audit(t, removed)
	results.add(t, "1 kill", "missing copies", fmt.Sprint(missing), "0", missing == 0)
	results.add(t, "1 kill", "stale copies (content differs from the source)", fmt.Sprint(staleCopies), "0", staleCopies == 0)
	results.add(t, "1 kill", fmt.Sprintf("copies of the removed entry %s left", removed), fmt.Sprint(orphans), "0", orphans == 0)
	changed := foreign.changed(t, f)
	results.add(t, "1 kill", fmt.Sprintf("foreign objects changed (of %d, by content and resourceVersion)", len(foreign)), fmt.Sprint(len(changed)), "0", len(changed) == 0)
	if len(changed) > 0 {
		t.Logf("changed foreign objects: %q", changed)
	}

	f.checkOccupied(t, occ)

	// Every copy stale at the kill needs one write carried out, and no
	// more: writes in flight when Courier was killed may still have landed
	// after the snapshot (at most --copy-workers Clusters, four writes
	// each), which is the only slack below.
	writes, accepted, needless := f.writesSince(t, restarted, stale)
	low := max(len(stale)-inFlightAtKill, 1)
	results.add(t, "1 kill", "writes after the last restart (accepted) / copies stale at the last kill",
		fmt.Sprintf("%d (%d) / %d", writes, accepted, len(stale)), fmt.Sprintf("%d <= accepted <= stale", low), low <= accepted && accepted <= len(stale))
	results.add(t, "1 kill", "writes after the last restart to copies current at the last kill", fmt.Sprint(needless), "0", needless == 0)
}

// snapshot lists the fleet's copies on every downstream and returns how
// many of the listed ones hold value, and the copies a restarted Courier
// must write: listed ones missing or not holding value, and copies of
// removed ("ns/name").
func (f *fleetRun) snapshot(t *testing.T, value, removed string) (int, map[string]bool) {
	t.Helper()
	present := map[string]string{}
	for _, kube := range f.down {
		list, err := kube.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{LabelSelector: chaosLabel + "=copy"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			present[s.Namespace+"/"+s.Name] = string(s.Data[roundKey])
		}
	}
	stale := map[string]bool{}
	current := 0
	for i := 1; i <= f.n; i++ {
		for _, name := range f.listed {
			k := dest(i) + "/" + name
			if v, ok := present[k]; ok && v == value {
				current++
			} else {
				stale[k] = true
			}
		}
		if k := dest(i) + "/" + removed; present[k] != "" && !contains(f.listed, removed) {
			stale[k] = true
		}
	}
	return current, stale
}

// waitGone waits until no copy of name is left downstream.
func (f *fleetRun) waitGone(t *testing.T, name string) {
	t.Helper()
	left := -1
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, f.budget(), true, func(ctx context.Context) (bool, error) {
		left = 0
		for _, kube := range f.down {
			list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: chaosLabel + "=copy", FieldSelector: "metadata.name=" + name})
			if err != nil {
				return false, nil
			}
			left += len(list.Items)
		}
		return left == 0, nil
	})
	if err != nil {
		t.Errorf("%d copies of the removed entry %s still there after %s", left, name, f.budget())
	}
}

// audit compares every copy downstream with its source: wanted copies
// missing, copies whose type or data differ, and copies of removed or in
// no wanted namespace.
func (f *fleetRun) audit(t *testing.T, removed string) (missing, stale, orphans int) {
	t.Helper()
	ctx := context.Background()
	src := map[string]*corev1.Secret{}
	for _, name := range f.listed {
		s, err := f.up.CoreV1().Secrets(workspace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		src[name] = s
	}
	wanted := map[string]bool{}
	for i := 1; i <= f.n; i++ {
		for _, name := range f.listed {
			wanted[dest(i)+"/"+name] = true
		}
	}
	seen := map[string]bool{}
	for d, kube := range f.down {
		list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: chaosLabel + "=copy"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			k := s.Namespace + "/" + s.Name
			if !wanted[k] {
				orphans++
				t.Logf("downstream-%d: %s is wanted by nothing", d+1, k)
				continue
			}
			seen[k] = true
			want := src[s.Name]
			if s.Type != want.Type || !equalData(s.Data, want.Data) {
				stale++
				t.Logf("downstream-%d: %s differs from its source", d+1, k)
			}
		}
	}
	missing = len(wanted) - len(seen)
	return missing, stale, orphans
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(w) != string(v) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writesSince counts Courier's writes into the fleet's destination
// namespaces that the downstream audit logs completed at or after since,
// those carried out, and those to an object not in stale.
func (f *fleetRun) writesSince(t *testing.T, since time.Time, stale map[string]bool) (writes, accepted, needless int) {
	t.Helper()
	for _, ds := range env.Downstreams {
		all, err := fleetsim.CourierWrites(ds.AuditLog)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range all {
			if w.Time.Before(since) || !(strings.HasPrefix(w.Namespace, "chaos-c") || w.Resource == "namespaces" && strings.HasPrefix(w.Name, "chaos-c")) {
				continue
			}
			writes++
			if w.Accepted() {
				accepted++
			}
			if w.Resource != "secrets" || !stale[w.Namespace+"/"+w.Name] {
				needless++
				t.Logf("write after the last restart to an object that was current: %s", w)
			}
		}
	}
	return writes, accepted, needless
}

// foreignObjects are objects beside the copies that Courier must never
// change, by "kind ns/name" on downstream index, with their
// resourceVersion and content as created.
type foreignObjects map[string]foreignObject

type foreignObject struct {
	downstream int
	kind       string
	ns, name   string
	rv         string
	content    string
}

// createForeign puts three objects in every destination namespace: a
// Secret of nobody's, a Secret labelled as a copy of another upstream's
// HelmOp (managed-by=courier, its owner hash), and a ConfigMap named like
// a listed Secret.
func (f *fleetRun) createForeign(t *testing.T) foreignObjects {
	t.Helper()
	ctx := context.Background()
	other := types.NamespacedName{Namespace: workspace, Name: "other"}
	out := foreignObjects{}
	var mu sync.Mutex
	err := fleetsim.Parallel(f.n, setupWorkers, func(idx int) error {
		i := idx + 1
		d := f.downstreamOf(i)
		kube := f.down[d]
		plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dest(i), Name: "foreign", Labels: map[string]string{"chaos-foreign": "plain"}},
			StringData: map[string]string{"k": "mine"}}
		forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dest(i), Name: "other-upstream",
			Labels:      map[string]string{copyspec.LabelManagedBy: copyspec.ManagedByValue, copyspec.LabelOwner: copyspec.OwnerHash("another-upstream", other)},
			Annotations: map[string]string{copyspec.AnnotationHelmOp: other.String(), copyspec.AnnotationUpstream: "another-upstream"}},
			StringData: map[string]string{"k": "theirs"}}
		s1, err := kube.CoreV1().Secrets(dest(i)).Create(ctx, plain, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		s2, err := kube.CoreV1().Secrets(dest(i)).Create(ctx, forged, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		cm, err := kube.CoreV1().ConfigMaps(dest(i)).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dest(i), Name: sourceName(0)},
			Data: map[string]string{"k": "a ConfigMap named like a listed Secret"}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, o := range []foreignObject{
			{d, "Secret", s1.Namespace, s1.Name, s1.ResourceVersion, content(s1.Labels, s1.Annotations, s1.Data)},
			{d, "Secret", s2.Namespace, s2.Name, s2.ResourceVersion, content(s2.Labels, s2.Annotations, s2.Data)},
			{d, "ConfigMap", cm.Namespace, cm.Name, cm.ResourceVersion, content(cm.Labels, cm.Annotations, cm.Data)},
		} {
			out[o.kind+" "+o.ns+"/"+o.name] = o
		}
		return nil
	})
	if err != nil {
		t.Fatalf("creating foreign objects: %v", err)
	}
	return out
}

func content(parts ...any) string {
	b, _ := json.Marshal(parts)
	return string(b)
}

// changed reads every foreign object again and names those whose
// resourceVersion or content changed, or that are gone.
func (fo foreignObjects) changed(t *testing.T, f *fleetRun) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for key, o := range fo {
		var rv, now string
		var err error
		if o.kind == "Secret" {
			var s *corev1.Secret
			if s, err = f.down[o.downstream].CoreV1().Secrets(o.ns).Get(ctx, o.name, metav1.GetOptions{}); err == nil {
				rv, now = s.ResourceVersion, content(s.Labels, s.Annotations, s.Data)
			}
		} else {
			var cm *corev1.ConfigMap
			if cm, err = f.down[o.downstream].CoreV1().ConfigMaps(o.ns).Get(ctx, o.name, metav1.GetOptions{}); err == nil {
				rv, now = cm.ResourceVersion, content(cm.Labels, cm.Annotations, cm.Data)
			}
		}
		switch {
		case err != nil:
			out = append(out, key+": "+err.Error())
		case rv != o.rv || now != o.content:
			out = append(out, key)
		}
	}
	return out
}
