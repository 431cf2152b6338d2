package fieldcopy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/fieldcopy/resources"
	"github.com/courier-dev/courier/pkg/memstore"
)

var (
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	fedGVR     = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "federatedsecrets"}
)

// fakeResolver knows secrets and federatedsecrets.
type fakeResolver struct{}

func (fakeResolver) Resolve(spec string) (resources.Resolved, error) {
	switch spec {
	case "secret", "secrets", "Secret":
		return resources.Resolved{GVR: secretsGVR, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespaced: true}, nil
	case "federatedsecret", "federatedsecrets":
		return resources.Resolved{GVR: fedGVR, GVK: schema.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "FederatedSecret"}, Namespaced: true}, nil
	}
	return resources.Resolved{}, fmt.Errorf("resource %q is not served by the API server", spec)
}

func secret(ns, name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"data":     data,
	}}
}

func fed(ns, name string, annotations map[string]string, template map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.dev/v1", "kind": "FederatedSecret",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"template": template},
	}}
	u.SetAnnotations(annotations)
	return u
}

type harness struct {
	t      *testing.T
	client *dynamicfake.FakeDynamicClient
	// meta answers the controller's metadata lists and watches from
	// client's objects, so tests change objects in one place; its actions
	// are apart from client's, which are the full reads and writes.
	meta  *metadatafake.FakeMetadataClient
	store *memstore.Store[*courier.FieldCopy]
	ctrl  *Controller

	mu      sync.Mutex
	updates int // update requests that reached the tracker
	rv      int // the last resourceVersion given out
}

// kinds are the kinds of the resources the fake clients know.
var kinds = map[schema.GroupVersionResource]schema.GroupVersionKind{
	secretsGVR: {Version: "v1", Kind: "Secret"},
	fedGVR:     {Group: "example.dev", Version: "v1", Kind: "FederatedSecret"},
}

func start(t *testing.T, cross bool, objs ...runtime.Object) *harness {
	t.Helper()
	return startTargets(t, []string{"federatedsecrets"}, cross, objs...)
}

func startTargets(t *testing.T, targets []string, cross bool, objs ...runtime.Object) *harness {
	t.Helper()
	return startWith(t, func(cfg *Config) { cfg.Targets, cfg.CrossNamespace = targets, cross }, objs...)
}

// startWith starts a controller over fake clients holding objs; configure
// sets Targets and anything else.
func startWith(t *testing.T, configure func(*Config), objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{t: t, store: memstore.New[*courier.FieldCopy]()}
	for _, o := range objs {
		o.(*unstructured.Unstructured).SetResourceVersion(h.nextRV())
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		secretsGVR: "SecretList",
		fedGVR:     "FederatedSecretList",
	}, objs...)
	h.client = client
	h.meta = metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	h.serveResourceVersions()
	h.serveMetadata()
	client.PrependReactor("update", "federatedsecrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		h.mu.Lock()
		h.updates++
		h.mu.Unlock()
		return false, nil, nil
	})
	cfg := Config{
		Dynamic:       client,
		Metadata:      h.meta,
		Resolver:      fakeResolver{},
		Store:         h.store,
		RetryInterval: 100 * time.Millisecond,
		// Most tests copy from Secrets; export_test.go turns this off.
		SecretSources: true,
	}
	configure(&cfg)
	h.ctrl = NewController(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go h.ctrl.Run(ctx, 2)
	h.eventually("controller ready", func() (bool, string) { return h.ctrl.Ready(), "not ready" })
	return h
}

func (h *harness) nextRV() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rv++
	return strconv.Itoa(h.rv)
}

// serveResourceVersions makes the dynamic fake behave like an API server
// where the controller depends on it: creates and updates give the object
// a new resourceVersion, and an update carrying a stale one is a conflict.
func (h *harness) serveResourceVersions() {
	tracker := h.client.Tracker()
	h.client.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		obj.SetResourceVersion(h.nextRV())
		if err := tracker.Create(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj.DeepCopy(), nil
	})
	h.client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		cur, err := tracker.Get(a.GetResource(), a.GetNamespace(), obj.GetName())
		if err != nil {
			return true, nil, err
		}
		if rv := obj.GetResourceVersion(); rv != "" && rv != cur.(*unstructured.Unstructured).GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), obj.GetName(), fmt.Errorf("the object has been modified"))
		}
		obj.SetResourceVersion(h.nextRV())
		if err := tracker.Update(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj.DeepCopy(), nil
	})
}

// serveMetadata answers the metadata client's lists and watches from the
// dynamic client's objects, as metadata.
func (h *harness) serveMetadata() {
	tracker := h.client.Tracker()
	h.meta.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.List(a.GetResource(), kinds[a.GetResource()], a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return true, nil, err
		}
		list := &metav1.List{}
		if lm, err := meta.ListAccessor(obj); err == nil {
			list.ResourceVersion = lm.GetResourceVersion()
		}
		for _, item := range items {
			list.Items = append(list.Items, runtime.RawExtension{Object: asMetadata(item)})
		}
		return true, list, nil
	})
	h.meta.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			e.Object = asMetadata(e.Object)
			return e, true
		}), nil
	})
}

// asMetadata is what a metadata request returns for an object.
func asMetadata(obj runtime.Object) runtime.Object {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}}
	raw, _ := u.Object["metadata"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &m.ObjectMeta); err != nil {
		panic(err)
	}
	return m
}

func (h *harness) eventually(what string, check func() (bool, string)) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = check(); ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

func (h *harness) updateCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.updates
}

// row returns the phase and message of a row, or "" when absent.
func (h *harness) row(ns, name string) (courier.FieldCopyPhase, string) {
	r, ok := h.store.Get(ns, name)
	if !ok {
		return "", ""
	}
	return r.Status.Phase, r.Status.Message
}

func (h *harness) waitRow(ns, name string, phase courier.FieldCopyPhase, msg string) {
	h.t.Helper()
	h.eventually(fmt.Sprintf("row %s/%s %s", ns, name, phase), func() (bool, string) {
		p, m := h.row(ns, name)
		return p == phase && strings.Contains(m, msg), fmt.Sprintf("%q %q; rows: %v", p, m, h.rowNames())
	})
}

func (h *harness) rowNames() []string {
	items, _ := h.store.List("", nil)
	var names []string
	for _, r := range items {
		names = append(names, r.Namespace+"/"+r.Name+"="+string(r.Status.Phase))
	}
	return names
}

// get reads an object from the fake's store, not through the client, so
// that the client's actions are the controller's only.
func (h *harness) get(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	h.t.Helper()
	obj, err := h.client.Tracker().Get(gvr, ns, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured).DeepCopy()
}

// reads counts the controller's GETs of one object.
func (h *harness) reads(gvr schema.GroupVersionResource, ns, name string) int {
	n := 0
	for _, a := range h.client.Actions() {
		if g, ok := a.(clienttesting.GetAction); ok && a.GetVerb() == "get" && a.GetResource() == gvr && a.GetNamespace() == ns && g.GetName() == name {
			n++
		}
	}
	return n
}

func (h *harness) update(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	h.t.Helper()
	if _, err := h.client.Resource(gvr).Namespace(u.GetNamespace()).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) waitData(ns, name string, want string) {
	h.t.Helper()
	h.eventually("target data "+want, func() (bool, string) {
		got := fmt.Sprint(h.get(fedGVR, ns, name).Object["spec"].(map[string]any)["template"])
		return got == want, got
	})
}

const copyData = "k8s-copier.fig.org/replace-spec.template.data"

func TestCopyAndSourceChange(t *testing.T) {
	h := start(t, false,
		secret("ns1", "cloud-secret-master", map[string]any{"k": "djE="}),
		fed("ns1", "fs", map[string]string{copyData: "secret:cloud-secret-master:data"}, map[string]any{}))
	h.waitData("ns1", "fs", "map[data:map[k:djE=]]")
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "spec.template.data holds data of secret ns1/cloud-secret-master")
	r, _ := h.store.Get("ns1", "federatedsecret.fs.spec.template.data")
	if r.Status.LastAppliedTime == nil || r.Spec.Source == nil || r.Spec.Source.Namespace != "ns1" {
		t.Errorf("row %+v: want lastAppliedTime and a source in ns1", r)
	}

	s := h.get(secretsGVR, "ns1", "cloud-secret-master")
	s.Object["data"] = map[string]any{"k": "djI="}
	h.update(secretsGVR, s)
	h.waitData("ns1", "fs", "map[data:map[k:djI=]]")
}

// TestAlreadyRightIsNotWritten checks that a target holding the right value
// is never written, even when looked at again.
func TestAlreadyRightIsNotWritten(t *testing.T) {
	h := start(t, false,
		secret("ns1", "src", map[string]any{"k": "djE="}),
		fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{"data": map[string]any{"k": "djE="}}))
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "holds")
	h.ctrl.SetLeading(false)
	h.ctrl.SetLeading(true) // requeues every target
	// A second target that does need a write proves the queue was worked
	// after the requeue.
	if _, err := h.client.Resource(fedGVR).Namespace("ns1").Create(context.Background(),
		fed("ns1", "other", map[string]string{copyData: "secret:src:data"}, map[string]any{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitData("ns1", "other", "map[data:map[k:djE=]]")
	if n := h.updateCount(); n != 1 {
		t.Fatalf("%d updates; want 1 (only the target that needed it)", n)
	}
}

func TestConflictIsRetried(t *testing.T) {
	h := start(t, false, secret("ns1", "src", map[string]any{"k": "djE="}))
	conflicts := 0
	h.client.PrependReactor("update", "federatedsecrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(fedGVR.GroupResource(), "fs", fmt.Errorf("the object has been modified"))
		}
		return false, nil, nil
	})
	if _, err := h.client.Resource(fedGVR).Namespace("ns1").Create(context.Background(),
		fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitData("ns1", "fs", "map[data:map[k:djE=]]")
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "holds")
	if conflicts != 1 {
		t.Fatalf("the conflict reactor ran %d times", conflicts)
	}
	var gets int
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource() == fedGVR {
			gets++
		}
	}
	if gets == 0 {
		t.Error("the target was not re-read after the conflict")
	}
}

func TestCrossNamespace(t *testing.T) {
	objs := func() []runtime.Object {
		return []runtime.Object{
			secret("ns2", "src", map[string]any{"k": "djE="}),
			fed("ns1", "fs", map[string]string{copyData: "secret:ns2/src:data"}, map[string]any{}),
		}
	}
	h := start(t, false, objs()...)
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseRefused, "--fieldcopy-cross-namespace")
	if n := h.updateCount(); n != 0 {
		t.Fatalf("refused rule wrote the target %d times", n)
	}
	if got := fmt.Sprint(h.get(fedGVR, "ns1", "fs").Object["spec"]); got != "map[template:map[]]" {
		t.Fatalf("target changed: %s", got)
	}

	h = start(t, true, objs()...)
	h.waitData("ns1", "fs", "map[data:map[k:djE=]]")
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "secret ns2/src")
}

// TestRemovedAnnotationEndsRule removes one target's annotation, then
// changes the source that target and a second one read: once the second
// target has the new value, the first must still have the old one.
func TestRemovedAnnotationEndsRule(t *testing.T) {
	h := start(t, false,
		secret("ns1", "src", map[string]any{"k": "djE="}),
		fed("ns1", "a", map[string]string{copyData: "secret:src:data"}, map[string]any{}),
		fed("ns1", "b", map[string]string{copyData: "secret:src:data"}, map[string]any{}))
	h.waitData("ns1", "a", "map[data:map[k:djE=]]")
	h.waitData("ns1", "b", "map[data:map[k:djE=]]")

	a := h.get(fedGVR, "ns1", "a")
	a.SetAnnotations(nil)
	h.update(fedGVR, a)
	h.eventually("row of a gone", func() (bool, string) {
		p, _ := h.row("ns1", "federatedsecret.a.spec.template.data")
		return p == "", string(p)
	})

	s := h.get(secretsGVR, "ns1", "src")
	s.Object["data"] = map[string]any{"k": "djI="}
	h.update(secretsGVR, s)
	h.waitData("ns1", "b", "map[data:map[k:djI=]]")
	if got := fmt.Sprint(h.get(fedGVR, "ns1", "a").Object["spec"].(map[string]any)["template"]); got != "map[data:map[k:djE=]]" {
		t.Fatalf("target a changed after its annotation was removed: %s", got)
	}
}

// TestRulesAreIndependent checks literal, bracketed key, field-copies list,
// merge and invalid rules on one target: bad rules are rows with messages
// and the good ones still apply.
func TestRulesAreIndependent(t *testing.T) {
	h := start(t, false,
		secret("ns1", "tls-src", map[string]any{"tls.crt": "Y2VydA==", "ca.crt": "Y2E="}),
		fed("ns1", "fs", map[string]string{
			"k8s-copier.fig.org/replace-spec.template.lit":    `json:{"a":1}`,
			"k8s-copier.fig.org/replace-spec.template.cert":   "secret:tls-src:data[tls.crt]",
			"k8s-copier.fig.org/merge-spec.template.merged":   `json:{"b":2,"gone":null}`,
			"k8s-copier.fig.org/replace-spec.template.bad":    "widgets:x:data",
			"k8s-copier.fig.org/replace-spec.template.nopath": "secret:tls-src:data.missing",
			"k8s-copier.fig.org/replace-spec.template.json":   "json:{",
			"courier.dev/field-copies":                        `[{"to":"spec.template.data[ca.crt]","from":"secret:tls-src:data[ca.crt]"}]`,
		}, map[string]any{"merged": map[string]any{"a": "kept", "gone": "x"}}))
	h.waitData("ns1", "fs", "map[cert:Y2VydA== data:map[ca.crt:Y2E=] lit:map[a:1] merged:map[a:kept b:2]]")
	for name, want := range map[string]courier.FieldCopyPhase{
		"federatedsecret.fs.spec.template.lit":         courier.FieldCopyPhaseApplied,
		"federatedsecret.fs.spec.template.cert":        courier.FieldCopyPhaseApplied,
		"federatedsecret.fs.spec.template.merged":      courier.FieldCopyPhaseApplied,
		"federatedsecret.fs.spec.template.data-ca.crt": courier.FieldCopyPhaseApplied,
		"federatedsecret.fs.spec.template.bad":         courier.FieldCopyPhaseInvalid,
		"federatedsecret.fs.spec.template.nopath":      courier.FieldCopyPhaseSourceMissing,
		"federatedsecret.fs.spec.template.json":        courier.FieldCopyPhaseInvalid,
	} {
		h.waitRow("ns1", name, want, "")
	}
	if _, msg := h.row("ns1", "federatedsecret.fs.spec.template.bad"); !strings.Contains(msg, `"widgets" is not served`) {
		t.Errorf("bad resource message: %q", msg)
	}
	// No row or message may carry a copied value.
	items, _ := h.store.List("", nil)
	for _, r := range items {
		for _, v := range []string{"Y2VydA==", "Y2E=", "kept"} {
			if strings.Contains(fmt.Sprintf("%+v", r), v) {
				t.Errorf("row %s carries a copied value", r.Name)
			}
		}
	}
}

func TestFollowerShowsPending(t *testing.T) {
	h := start(t, false, secret("ns1", "src", map[string]any{"k": "djE="}))
	h.ctrl.SetLeading(false)
	if h.ctrl.isLeading() {
		t.Fatal("SetLeading(false) did not take")
	}
	if _, err := h.client.Resource(fedGVR).Namespace("ns1").Create(context.Background(),
		fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhasePending, "the leader writes it")
	if n := h.updateCount(); n != 0 {
		t.Fatalf("a follower wrote %d times", n)
	}
	h.ctrl.SetLeading(true)
	h.waitData("ns1", "fs", "map[data:map[k:djE=]]")
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseApplied, "holds")
}

// TestTargetKindSharedAsSource has a Secret copy a key of another Secret:
// the kind is both target and source, and Courier holds it in one watch.
func TestTargetKindSharedAsSource(t *testing.T) {
	h := startTargets(t, []string{"secrets"}, false,
		secret("ns1", "tls-src", map[string]any{"ca.crt": "Q0E="}),
		func() *unstructured.Unstructured {
			u := secret("ns1", "tls-dst", map[string]any{"other": "Tw=="})
			u.SetAnnotations(map[string]string{"courier.dev/field-copies": `[{"to":"data[ca.crt]","from":"secret:tls-src:data[ca.crt]"}]`})
			return u
		}())
	h.eventually("ca.crt copied", func() (bool, string) {
		got := fmt.Sprint(h.get(secretsGVR, "ns1", "tls-dst").Object["data"])
		return got == "map[ca.crt:Q0E= other:Tw==]", got
	})
	h.waitRow("ns1", "secret.tls-dst.data-ca.crt", courier.FieldCopyPhaseApplied, "data[ca.crt] holds data[ca.crt] of secret ns1/tls-src")
	key := informerKey{GVR: secretsGVR}
	h.ctrl.mu.Lock()
	defer h.ctrl.mu.Unlock()
	if h.ctrl.sources[key] == nil || h.ctrl.sources[key] != h.ctrl.targets[key] {
		t.Fatalf("secrets are watched twice: source %p, target %p", h.ctrl.sources[key], h.ctrl.targets[key])
	}
}

// TestDroppedWriteIsNotRepeated makes the API server drop what Courier
// writes (as for a status field or a pruned one): the row says Failed, and
// looking at the target again does not write it again.
func TestDroppedWriteIsNotRepeated(t *testing.T) {
	h := start(t, false, secret("ns1", "src", map[string]any{"k": "djE="}))
	h.client.PrependReactor("update", "federatedsecrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		h.mu.Lock()
		h.updates++
		h.mu.Unlock()
		obj := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		unstructured.RemoveNestedField(obj.Object, "spec", "template", "data")
		obj.SetResourceVersion("999")
		return true, obj, nil
	})
	if _, err := h.client.Resource(fedGVR).Namespace("ns1").Create(context.Background(),
		fed("ns1", "fs", map[string]string{copyData: "secret:src:data"}, map[string]any{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitRow("ns1", "federatedsecret.fs.spec.template.data", courier.FieldCopyPhaseFailed, "did not keep the value written at spec.template.data")
	if n := h.updateCount(); n != 1 {
		t.Fatalf("%d updates, want 1", n)
	}
	// Courier looks again at the same version of the target: no write.
	key := objectKey{GVR: fedGVR, Namespace: "ns1", Name: "fs"}
	obj := h.get(fedGVR, "ns1", "fs")
	obj.SetResourceVersion("999")
	if _, err := h.ctrl.sync(context.Background(), key, obj, true); err != nil {
		t.Fatal(err)
	}
	if n := h.updateCount(); n != 1 {
		t.Fatalf("the dropped write was repeated: %d updates", n)
	}
	if p, _ := h.row("ns1", "federatedsecret.fs.spec.template.data"); p != courier.FieldCopyPhaseFailed {
		t.Fatalf("phase %s after looking again, want Failed", p)
	}
}

// TestWriteErrorsNameNoValues checks that an Invalid answer, whose message
// may quote the rejected value, is reduced to its field paths, and that a
// Forbidden answer is kept whole.
func TestWriteErrorsNameNoValues(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", field.ErrorList{
		field.Invalid(field.NewPath("data", "k"), "s3cr3t-value", "must be base64")})
	if got := writeError(invalid); strings.Contains(got, "s3cr3t-value") || !strings.Contains(got, "data.k") {
		t.Errorf("Invalid: %q", got)
	}
	forbidden := apierrors.NewForbidden(fedGVR.GroupResource(), "fs", fmt.Errorf("no update"))
	if got := writeError(forbidden); !strings.Contains(got, "forbidden") || !strings.Contains(got, "federatedsecrets") {
		t.Errorf("Forbidden: %q", got)
	}
	if got := writeError(fmt.Errorf("dial tcp: connection refused s3cr3t")); strings.Contains(got, "s3cr3t") {
		t.Errorf("other errors: %q", got)
	}
}

// TestWriteErrorBadRequest checks that a 400 BadRequest never shows the
// API server's text, which quotes the request body and the values in it
// (the kube-apiserver's own templates below), whatever the target's kind,
// and that the causes Courier recognises are named in its own words. The
// Forbidden case is the positive control: the same function shows the
// server's text where it holds no value.
func TestWriteErrorBadRequest(t *testing.T) {
	const hidden = " (its message is not shown: it can quote the values written)"
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{
			name: "an object where a string belongs (a path through a ConfigMap's data)",
			err:  apierrors.NewBadRequest(`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal object into Go struct field ConfigMap.data of type string`),
			want: "the API server answered 400 BadRequest: a value written does not have the type the target's kind has at that field (an object where a string belongs, say)" + hidden,
		},
		{
			name: "a number quoted by the decoder",
			err:  apierrors.NewBadRequest(`FederatedSecret in version "v1" cannot be handled as a FederatedSecret: json: cannot unmarshal number 8675309867530986753098 into Go struct field .spec.replicas of type int32`),
			want: "the API server answered 400 BadRequest: a value written does not have the type the target's kind has at that field (an object where a string belongs, say)" + hidden,
		},
		{
			name: "the body quoted",
			err:  apierrors.NewBadRequest(`the object provided is unrecognized (must be of type Secret): couldn't get version/kind; json parse error: unexpected end of JSON input ({"data":{"k":"czNjcjN0LXZhbHVl ...)`),
			want: "the API server answered 400 BadRequest: the API server could not decode the target as its kind" + hidden,
		},
		{
			name: "nested too deep",
			err:  apierrors.NewBadRequest(`FederatedSecret in version "v1" cannot be handled as a FederatedSecret: exceeded max depth of 10000`),
			want: "the API server answered 400 BadRequest: the object is nested deeper than the API server decodes" + hidden,
		},
		{
			name: "a cause Courier does not know",
			err:  apierrors.NewBadRequest(`admission webhook "check.example.dev" denied the request: value s3cr3t-value is not allowed`),
			want: "the API server answered 400 BadRequest" + hidden,
		},
		{
			name: "Forbidden: the server's text is shown",
			err:  apierrors.NewForbidden(fedGVR.GroupResource(), "fs", fmt.Errorf("no update")),
			want: `federatedsecrets.example.dev "fs" is forbidden: no update`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := writeError(tc.err)
			if got != tc.want {
				t.Errorf("writeError = %q, want %q", got, tc.want)
			}
			for _, value := range []string{"s3cr3t", "czNjcjN0", "8675309", "ConfigMap.data"} {
				if strings.Contains(got, value) {
					t.Errorf("writeError quotes %q: %q", value, got)
				}
			}
		})
	}
}
