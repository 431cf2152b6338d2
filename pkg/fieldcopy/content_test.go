package fieldcopy

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/fieldcopy/rules"
)

// unrelatedData is the data of Secrets no rule names; it must never reach
// the controller.
const unrelatedData = "VU5SRUxBVEVE"

func unrelatedSecret(ns, name string) *unstructured.Unstructured {
	u := secret(ns, name, map[string]any{"blob": unrelatedData})
	// kubectl apply keeps the whole object, data included, in an
	// annotation: metadata alone can carry a Secret's values.
	u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"blob":"` + unrelatedData + `"}}`})
	return u
}

// TestUnnamedSecretsAreNeverRead proves that Courier holds the data of the
// Secret a rule names and of no other: with Secrets both a target kind and
// a source kind, the fake clients are never asked to list or watch Secrets
// in full, and the only Secret read in full (GET) is the named source —
// once, however many targets name it, until it changes. The controller's
// watches hold trimmed metadata only, and the source's content is dropped
// when no rule names it any more.
func TestUnnamedSecretsAreNeverRead(t *testing.T) {
	const unrelated = 20
	objs := []runtime.Object{
		secret("ns1", "src", map[string]any{"k": "djE="}),
		fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{}),
	}
	for i := range unrelated {
		objs = append(objs, unrelatedSecret("ns1", fmt.Sprintf("unrelated-%d", i)))
	}
	h := startTargets(t, []string{"federatedsecrets", "secrets"}, false, objs...)

	// Positive control: the named source is read and copied.
	h.waitData("ns1", "fs", "map[data:map[k:djE=]]")
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "holds data of secret ns1/src")

	// Every target looked at again, and a second target naming the same
	// source: the source is not read again while it is the same version.
	h.ctrl.SetLeading(false)
	h.ctrl.SetLeading(true)
	if _, err := h.client.Resource(fedGVR).Namespace("ns1").Create(context.Background(),
		fed("ns1", "other", map[string]string{copyData: "secret:src:data"}, map[string]any{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitData("ns1", "other", "map[data:map[k:djE=]]")
	if n := h.reads(secretsGVR, "ns1", "src"); n != 1 {
		t.Errorf("the source was read %d times; want once while it does not change", n)
	}

	// The unrelated Secrets change, then the source does: the same watch
	// delivers the source's change after theirs.
	for i := range unrelated {
		u := h.get(secretsGVR, "ns1", fmt.Sprintf("unrelated-%d", i))
		u.Object["data"] = map[string]any{"blob": unrelatedData + "Mg=="}
		h.update(secretsGVR, u)
	}
	src := h.get(secretsGVR, "ns1", "src")
	src.Object["data"] = map[string]any{"k": "djI="}
	h.update(secretsGVR, src)
	h.waitData("ns1", "fs", "map[data:map[k:djI=]]")
	h.waitData("ns1", "other", "map[data:map[k:djI=]]")
	// Once more for the new version; the two targets may be reconciled at
	// the same time by the two workers, each reading it.
	if n := h.reads(secretsGVR, "ns1", "src"); n < 2 || n > 3 {
		t.Errorf("the source was read %d times; want once per version and worker", n)
	}

	// What the controller asked for: Secrets in full only by GET of the
	// named source; lists and watches of Secrets went to the metadata
	// client.
	for _, a := range h.client.Actions() {
		if a.GetResource() != secretsGVR {
			continue
		}
		switch a.GetVerb() {
		case "get":
			if name := a.(interface{ GetName() string }).GetName(); name != "src" {
				t.Errorf("Secret %s, which no rule names, was read in full", name)
			}
		case "update": // the test's own changes
		default:
			t.Errorf("Secrets were asked for in full: %s %s", a.GetVerb(), a.GetNamespace())
		}
	}
	var metaVerbs []string
	for _, a := range h.meta.Actions() {
		if a.GetResource() == secretsGVR {
			metaVerbs = append(metaVerbs, a.GetVerb())
		}
	}
	sort.Strings(metaVerbs)
	if got := strings.Join(metaVerbs, ","); got != "list,watch" {
		t.Errorf("metadata requests for Secrets: %s; want one list and one watch (target and source kind share it)", got)
	}

	// What the controller holds: trimmed metadata in its watches, and
	// content of the named source and the targets with rules only.
	h.ctrl.mu.Lock()
	for key, inf := range h.ctrl.sources {
		checkTrimmed(t, key, inf)
	}
	for key, inf := range h.ctrl.targets {
		checkTrimmed(t, key, inf)
	}
	var held []string
	for k, u := range h.ctrl.sourceContent {
		held = append(held, "source "+k.String())
		if strings.Contains(fmt.Sprint(u.Object), unrelatedData) {
			t.Errorf("source content %s holds unrelated data", k)
		}
	}
	for k := range h.ctrl.targetContent {
		held = append(held, "target "+k.String())
	}
	h.ctrl.mu.Unlock()
	sort.Strings(held)
	if got := strings.Join(held, ", "); got != "source secrets/ns1/src, target federatedsecrets/ns1/fs, target federatedsecrets/ns1/other" {
		t.Errorf("full objects held: %s", got)
	}

	// Once no rule names the source, its content goes.
	for _, name := range []string{"fs", "other"} {
		u := h.get(fedGVR, "ns1", name)
		u.SetAnnotations(nil)
		h.update(fedGVR, u)
	}
	h.eventually("no content held", func() (bool, string) {
		h.ctrl.mu.Lock()
		defer h.ctrl.mu.Unlock()
		return len(h.ctrl.sourceContent) == 0 && len(h.ctrl.targetContent) == 0,
			fmt.Sprintf("%d sources, %d targets", len(h.ctrl.sourceContent), len(h.ctrl.targetContent))
	})
}

// checkTrimmed fails unless every object a watch holds is metadata with
// nothing but identity, resourceVersion and rule annotations.
func checkTrimmed(t *testing.T, key informerKey, inf cache.SharedIndexInformer) {
	t.Helper()
	for _, obj := range inf.GetStore().List() {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Errorf("the %s watch holds a %T", key.GVR.Resource, obj)
			continue
		}
		if len(m.ManagedFields) > 0 || len(m.Labels) > 0 {
			t.Errorf("the %s watch holds more metadata of %s than it needs", key.GVR.Resource, m.Name)
		}
		for k := range m.Annotations {
			if !rules.IsRuleAnnotation(k) {
				t.Errorf("the %s watch holds annotation %s of %s", key.GVR.Resource, k, m.Name)
			}
		}
	}
}

// TestSharedInformer gives the controller a metadata watch of Secrets over
// all namespaces that the process already runs: Secrets are then not
// listed a second time, and a watch limited to --fieldcopy-namespace still
// ignores targets elsewhere.
func TestSharedInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dst := func(ns string) *unstructured.Unstructured {
		u := secret(ns, "dst", map[string]any{})
		u.SetAnnotations(map[string]string{"k8s-copier.fig.org/replace-data.copy": "secret:src:data.k"})
		return u
	}
	var shared cache.SharedIndexInformer
	h := startWith(t, func(cfg *Config) {
		shared = metadatainformer.NewFilteredMetadataInformer(cfg.Metadata, secretsGVR, "", 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
		go shared.Run(ctx.Done())
		cfg.Shared = map[schema.GroupVersionResource]cache.SharedIndexInformer{secretsGVR: shared}
		cfg.Targets = []string{"secrets"}
		cfg.Namespaces = []string{"ns1"}
	},
		secret("ns1", "src", map[string]any{"k": "djE="}), dst("ns1"),
		secret("ns2", "src", map[string]any{"k": "djE="}), dst("ns2"))

	h.eventually("data.copy written in ns1", func() (bool, string) {
		got := fmt.Sprint(h.get(secretsGVR, "ns1", "dst").Object["data"])
		return got == "map[copy:djE=]", got
	})
	h.waitRow("ns1", "secret.dst.data.copy", courier.FieldCopyPhaseApplied, "")
	if p, _ := h.row("ns2", "secret.dst.data.copy"); p != "" {
		t.Errorf("a target outside --fieldcopy-namespace has a row (%s)", p)
	}
	if n := h.reads(secretsGVR, "ns2", "dst") + h.reads(secretsGVR, "ns2", "src"); n != 0 {
		t.Errorf("Secrets outside --fieldcopy-namespace were read %d times", n)
	}
	lists := 0
	for _, a := range h.meta.Actions() {
		if a.GetResource() == secretsGVR && a.GetVerb() == "list" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("Secrets were listed %d times; want once, by the shared watch", lists)
	}
	h.ctrl.mu.Lock()
	defer h.ctrl.mu.Unlock()
	key := informerKey{GVR: secretsGVR, Namespace: "ns1"}
	if h.ctrl.targets[key] != shared || h.ctrl.sources[key] != shared {
		t.Errorf("the shared watch is not used: target %p, source %p, shared %p", h.ctrl.targets[key], h.ctrl.sources[key], shared)
	}
}

func TestTrimMetadata(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "s", Namespace: "ns", UID: "u", ResourceVersion: "7",
		Labels:        map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Annotations: map[string]string{
			copyData: "secret:x:data",
			"kubectl.kubernetes.io/last-applied-configuration": "{}",
			rules.FieldCopiesAnnotation:                        "[]",
			"k8s-copier.fig.org/merge-spec.x":                  "json:1",
		},
	}}
	out, err := trimMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	want := metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "u", ResourceVersion: "7", Annotations: map[string]string{
		copyData: "secret:x:data", rules.FieldCopiesAnnotation: "[]", "k8s-copier.fig.org/merge-spec.x": "json:1"}}
	if !reflect.DeepEqual(m.ObjectMeta, want) {
		t.Errorf("trimmed to %+v", m.ObjectMeta)
	}
	if tomb := (cache.DeletedFinalStateUnknown{Key: "ns/s"}); fmt.Sprint(must(trimMetadata(tomb))) != fmt.Sprint(tomb) {
		t.Error("a tombstone was changed")
	}
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}
