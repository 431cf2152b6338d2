package copyspec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

var (
	helmOp = types.NamespacedName{Namespace: "fleet-default", Name: "app"}
	owner  = Owner{UpstreamID: "up-1", HelmOp: helmOp}
	// ownerHash is OwnerHash(owner.UpstreamID, helmOp), pinned (computed with
	// printf 'up-1\0fleet-default\0app' | sha256sum | cut -c1-40): copies
	// already written downstream carry it, so it must never change.
	ownerHash = "8443496d37e098f22ceea25ae20974128b96a5f9"
)

func ptrBool(b bool) *bool { return &b }

func courierLabels(extra map[string]string) map[string]string {
	m := map[string]string{LabelManagedBy: ManagedByValue, LabelOwner: ownerHash}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func courierAnnotations(rv string, keep bool, extra map[string]string) map[string]string {
	m := map[string]string{
		AnnotationHelmOp:                "fleet-default/app",
		AnnotationUpstream:              "up-1",
		AnnotationSourceResourceVersion: rv,
	}
	if keep {
		m[AnnotationKeep] = "true"
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// sourceMeta is upstream metadata with everything that must not be copied:
// server-set fields, kubectl's last-applied, and forged Courier keys.
func sourceMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              name,
		Namespace:         "fleet-default",
		ResourceVersion:   "42",
		UID:               "source-uid",
		Generation:        3,
		CreationTimestamp: metav1.Unix(1000, 0),
		Finalizers:        []string{"example.com/f"},
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "pod-uid"}},
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Labels: map[string]string{
			"app":               "web",
			LabelManagedBy:      ManagedByValue,
			LabelOwner:          "0000000000000000000000000000000000000000",
			"courier.dev/other": "x",
			// Fleet's copy label decides ownership too: a copy carrying
			// it would be taken for Fleet's and left alone.
			FleetCopyLabel: "app-c1",
		},
		Annotations: map[string]string{
			"note":                          "kept",
			lastApplied:                     `{"kind":"Secret"}`,
			AnnotationHelmOp:                "victim/helmop",
			AnnotationUpstream:              "elsewhere",
			AnnotationKeep:                  "true",
			AnnotationSourceResourceVersion: "1",
			// Only the exact "courier.dev/" prefix is reserved.
			"sub.courier.dev/x": "kept",
		},
	}
}

func TestSecret(t *testing.T) {
	dockercfg := []byte(`{"auths":{"r.example.com":{"auth":"dTpw"}}}`)
	tests := []struct {
		name string
		src  *corev1.Secret
		ns   string
		o    Owner
		want *corev1.Secret
	}{
		{
			name: "dockerconfigjson keeps type, data, immutable; metadata filtered",
			src: &corev1.Secret{
				ObjectMeta: sourceMeta("pull"),
				Type:       corev1.SecretTypeDockerConfigJson,
				Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockercfg},
				Immutable:  ptrBool(true),
			},
			ns: "apps",
			o:  owner,
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Name:        "pull",
					Namespace:   "apps",
					Labels:      courierLabels(map[string]string{"app": "web"}),
					Annotations: courierAnnotations("42", false, map[string]string{"note": "kept", "sub.courier.dev/x": "kept"}),
				},
				Type:      corev1.SecretTypeDockerConfigJson,
				Data:      map[string][]byte{corev1.DockerConfigJsonKey: dockercfg},
				Immutable: ptrBool(true),
			},
		},
		{
			name: "bare opaque secret under keepResources",
			src: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "fleet-default", ResourceVersion: "7"},
				Type:       corev1.SecretTypeOpaque,
			},
			ns: "default",
			o:  Owner{UpstreamID: "up-1", HelmOp: helmOp, Keep: true},
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Name:        "plain",
					Namespace:   "default",
					Labels:      courierLabels(nil),
					Annotations: courierAnnotations("7", true, nil),
				},
				Type: corev1.SecretTypeOpaque,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Secret(tt.src, tt.ns, tt.o); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Secret():\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestConfigMap(t *testing.T) {
	tests := []struct {
		name string
		src  *corev1.ConfigMap
		want *corev1.ConfigMap
	}{
		{
			name: "data, binaryData, immutable; metadata filtered",
			src: &corev1.ConfigMap{
				ObjectMeta: sourceMeta("cfg"),
				Data:       map[string]string{"a": "1"},
				BinaryData: map[string][]byte{"b": {0, 1, 2}},
				Immutable:  ptrBool(false),
			},
			want: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:        "cfg",
					Namespace:   "apps",
					Labels:      courierLabels(map[string]string{"app": "web"}),
					Annotations: courierAnnotations("42", false, map[string]string{"note": "kept", "sub.courier.dev/x": "kept"}),
				},
				Data:       map[string]string{"a": "1"},
				BinaryData: map[string][]byte{"b": {0, 1, 2}},
				Immutable:  ptrBool(false),
			},
		},
		{
			name: "empty configmap",
			src:  &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e", ResourceVersion: "9"}},
			want: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:        "e",
					Namespace:   "apps",
					Labels:      courierLabels(nil),
					Annotations: courierAnnotations("9", false, nil),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ConfigMap(tt.src, "apps", owner); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ConfigMap():\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestNoAliasing(t *testing.T) {
	t.Run("secret", func(t *testing.T) {
		src := &corev1.Secret{
			ObjectMeta: sourceMeta("s"),
			Data:       map[string][]byte{"k": []byte("secret")},
			Immutable:  ptrBool(true),
		}
		before := src.DeepCopy()
		got := Secret(src, "apps", owner)
		got.Data["k"][0] = 'X'
		got.Data["new"] = []byte("n")
		*got.Immutable = false
		got.Labels["app"] = "changed"
		got.Annotations["note"] = "changed"
		if !reflect.DeepEqual(src, before) {
			t.Errorf("source changed through copy:\n got %#v\nwant %#v", src, before)
		}
	})
	t.Run("configmap", func(t *testing.T) {
		src := &corev1.ConfigMap{
			ObjectMeta: sourceMeta("c"),
			Data:       map[string]string{"k": "v"},
			BinaryData: map[string][]byte{"b": []byte("bin")},
			Immutable:  ptrBool(true),
		}
		before := src.DeepCopy()
		got := ConfigMap(src, "apps", owner)
		got.Data["k"] = "changed"
		got.BinaryData["b"][0] = 'X'
		*got.Immutable = false
		got.Labels["app"] = "changed"
		got.Annotations["note"] = "changed"
		if !reflect.DeepEqual(src, before) {
			t.Errorf("source changed through copy:\n got %#v\nwant %#v", src, before)
		}
	})
}

func TestOwnerHash(t *testing.T) {
	if got := OwnerHash(owner.UpstreamID, helmOp); got != ownerHash {
		t.Errorf("OwnerHash changed: got %q, want pinned %q", got, ownerHash)
	}
	if a, b := OwnerHash("u", helmOp), OwnerHash("u", helmOp); a != b {
		t.Errorf("OwnerHash not stable: %q != %q", a, b)
	}
	variants := []struct {
		name     string
		upstream string
		helmOp   types.NamespacedName
	}{
		{"base", "up-1", helmOp},
		{"other upstream", "up-2", helmOp},
		{"other namespace", "up-1", types.NamespacedName{Namespace: "fleet-local", Name: "app"}},
		{"other name", "up-1", types.NamespacedName{Namespace: "fleet-default", Name: "app2"}},
		{"separator shift ns/name", "up-1", types.NamespacedName{Namespace: "fleet-defaulta", Name: "pp"}},
		{"separator shift upstream/ns", "up-1fleet", types.NamespacedName{Namespace: "-default", Name: "app"}},
		{"empty", "", types.NamespacedName{}},
	}
	seen := map[string]string{}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			h := OwnerHash(v.upstream, v.helmOp)
			if errs := validation.IsValidLabelValue(h); len(errs) > 0 || h == "" {
				t.Errorf("OwnerHash %q is not a valid non-empty label value: %v", h, errs)
			}
			if prev, dup := seen[h]; dup {
				t.Errorf("OwnerHash %q for %q collides with %q", h, v.name, prev)
			}
			seen[h] = v.name
		})
	}
}

func TestOwnershipOf(t *testing.T) {
	ours := Secret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, "apps", owner)
	mod := func(f func(o *corev1.Secret)) *corev1.Secret {
		o := ours.DeepCopy()
		f(o)
		return o
	}
	other := Secret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, "apps",
		Owner{UpstreamID: "up-1", HelmOp: types.NamespacedName{Namespace: "fleet-default", Name: "other"}})
	tests := []struct {
		name string
		obj  metav1.Object
		want Ownership
	}{
		{"ours", ours, OwnedBy},
		{"ours with keep flipped", mod(func(o *corev1.Secret) { o.Annotations[AnnotationKeep] = "true" }), OwnedBy},
		{"no labels at all", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, NotManaged},
		{"managed-by another tool", mod(func(o *corev1.Secret) { o.Labels[LabelManagedBy] = "helm" }), NotManaged},
		{"owner label but no managed-by", mod(func(o *corev1.Secret) { delete(o.Labels, LabelManagedBy) }), NotManaged},
		{"another HelmOp's copy", other, OtherOwner},
		{"another upstream's copy", Secret(&corev1.Secret{}, "apps", Owner{UpstreamID: "up-2", HelmOp: helmOp}), OtherOwner},
		{"managed but owner label missing", mod(func(o *corev1.Secret) { delete(o.Labels, LabelOwner) }), OtherOwner},
		{"forged owner label: plain HelmOp name", mod(func(o *corev1.Secret) { o.Labels[LabelOwner] = "app" }), OtherOwner},
		{"forged: annotations claim us, label is another's", mod(func(o *corev1.Secret) {
			o.Labels[LabelOwner] = other.Labels[LabelOwner]
		}), OtherOwner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OwnershipOf(tt.obj, owner); got != tt.want {
				t.Errorf("OwnershipOf() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClaimedOwnerCluster(t *testing.T) {
	o := Owner{UpstreamID: "up-1", HelmOp: helmOp, Cluster: "c1"}
	labelled := Secret(&corev1.Secret{}, "apps", o)
	if _, ok := labelled.Annotations[LegacyAnnotationCluster]; ok {
		t.Errorf("a new copy carries the legacy annotation %s", LegacyAnnotationCluster)
	}
	legacy := labelled.DeepCopy() // as written before the cluster hash
	delete(legacy.Labels, LabelClusterHash)
	legacy.Annotations[LegacyAnnotationCluster] = "c1"
	naming := func(cluster string) func(metav1.Object) {
		return func(obj metav1.Object) { obj.GetAnnotations()[LegacyAnnotationCluster] = cluster }
	}
	both := labelled.DeepCopy() // hash and a stale legacy annotation: the hash decides
	naming("c2")(both)
	tests := []struct {
		name    string
		copy    *corev1.Secret
		cluster string
		want    bool
	}{
		{"labelled, its Cluster", labelled, "c1", true},
		{"labelled, another Cluster", labelled, "c2", false},
		{"labelled, same name in another namespace", labelled, "c1@other-ns", false},
		{"legacy, its Cluster", legacy, "c1", true},
		{"legacy, another Cluster", legacy, "c2", false},
		{"hash and legacy annotation disagree: the hash", both, "c1", true},
		{"hash and legacy annotation disagree: not the annotation's", both, "c2", false},
		{"naming no Cluster", Secret(&corev1.Secret{}, "apps", Owner{UpstreamID: "up-1", HelmOp: helmOp}), "c1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := ClaimedOwner(tt.copy)
			if !ok {
				t.Fatal("not claimed")
			}
			ns, name := helmOp.Namespace, tt.cluster
			if n, other, found := strings.Cut(tt.cluster, "@"); found {
				ns, name = other, n
			}
			if got := c.WrittenFor(ns, name); got != tt.want {
				t.Errorf("WrittenFor(%s/%s) = %v, want %v", ns, name, got, tt.want)
			}
		})
	}
	// A source cannot name a cluster for its copies.
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{LegacyAnnotationCluster: "c9"}}}
	if got := Secret(src, "apps", Owner{UpstreamID: "up-1", HelmOp: helmOp}).Annotations[LegacyAnnotationCluster]; got != "" {
		t.Fatalf("cluster annotation taken from the source: %q", got)
	}
}

func TestClaimedOwner(t *testing.T) {
	type claim struct {
		upstream string
		helmOp   types.NamespacedName
		keep     bool
		ok       bool
	}
	keepOwner := Owner{UpstreamID: "up-1", HelmOp: helmOp, Keep: true}
	base := ConfigMap(&corev1.ConfigMap{ObjectMeta: sourceMeta("c")}, "apps", owner)
	mod := func(f func(o *corev1.ConfigMap)) *corev1.ConfigMap {
		o := base.DeepCopy()
		f(o)
		return o
	}
	tests := []struct {
		name string
		obj  metav1.Object
		want claim
	}{
		{"round trip secret", Secret(&corev1.Secret{ObjectMeta: sourceMeta("s")}, "apps", owner), claim{"up-1", helmOp, false, true}},
		{"round trip configmap with keep", ConfigMap(&corev1.ConfigMap{}, "apps", keepOwner), claim{"up-1", helmOp, true, true}},
		{"round trip empty upstream id", Secret(&corev1.Secret{}, "x", Owner{HelmOp: helmOp}), claim{"", helmOp, false, true}},
		{"keep annotation not exactly true", mod(func(o *corev1.ConfigMap) { o.Annotations[AnnotationKeep] = "yes" }), claim{"up-1", helmOp, false, true}},
		{"helmop annotation tampered", mod(func(o *corev1.ConfigMap) { o.Annotations[AnnotationHelmOp] = "fleet-default/other" }), claim{}},
		{"upstream annotation tampered", mod(func(o *corev1.ConfigMap) { o.Annotations[AnnotationUpstream] = "up-2" }), claim{}},
		{"owner label tampered", mod(func(o *corev1.ConfigMap) { o.Labels[LabelOwner] = OwnerHash("up-2", helmOp) }), claim{}},
		{"owner label missing", mod(func(o *corev1.ConfigMap) { delete(o.Labels, LabelOwner) }), claim{}},
		{"managed-by missing", mod(func(o *corev1.ConfigMap) { delete(o.Labels, LabelManagedBy) }), claim{}},
		{"managed-by other value", mod(func(o *corev1.ConfigMap) { o.Labels[LabelManagedBy] = "helm" }), claim{}},
		{"upstream annotation missing", mod(func(o *corev1.ConfigMap) { delete(o.Annotations, AnnotationUpstream) }), claim{}},
		{"upstream annotation missing, empty upstream id", func() metav1.Object {
			o := Secret(&corev1.Secret{}, "x", Owner{HelmOp: helmOp})
			delete(o.Annotations, AnnotationUpstream)
			return o
		}(), claim{}},
		{"helmop annotation missing", mod(func(o *corev1.ConfigMap) { delete(o.Annotations, AnnotationHelmOp) }), claim{}},
		{"no annotations", mod(func(o *corev1.ConfigMap) { o.Annotations = nil }), claim{}},
		{"no labels", mod(func(o *corev1.ConfigMap) { o.Labels = nil }), claim{}},
	}
	// Malformed helmop annotations, each with a label that matches it, so
	// only the format check can reject them.
	for _, bad := range []string{"app", "/app", "fleet-default/", "a/b/c", ""} {
		ns, name, _ := strings.Cut(bad, "/")
		tests = append(tests, struct {
			name string
			obj  metav1.Object
			want claim
		}{"malformed helmop " + bad, mod(func(o *corev1.ConfigMap) {
			o.Annotations[AnnotationHelmOp] = bad
			o.Labels[LabelOwner] = OwnerHash("up-1", types.NamespacedName{Namespace: ns, Name: name})
		}), claim{}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := ClaimedOwner(tt.obj)
			got := claim{c.UpstreamID, c.HelmOp, c.Keep, ok}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ClaimedOwner() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClusterHashAndSelector(t *testing.T) {
	// Pinned: the label is a public name (docs/design.md#public-names); copies already
	// written carry it.
	if got := ClusterHash("up-1", "fleet-default", "c1"); got != "94ec9ebc97f61e9f1f500e5d4f45e6bb4271f956" {
		t.Errorf("ClusterHash = %q", got)
	}
	if ClusterHash("up", "a", "bc") == ClusterHash("up", "ab", "c") {
		t.Error("the separators do not keep namespace and name apart")
	}
	c := Secret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, "apps", Owner{UpstreamID: "up-1", HelmOp: types.NamespacedName{Namespace: "fleet-default", Name: "op"}, Cluster: "c1"})
	if !ClusterSelector("up-1", "fleet-default", "c1").Matches(labels.Set(c.Labels)) {
		t.Errorf("c1's selector does not select c1's copy %v", c.Labels)
	}
	if ClusterSelector("up-1", "fleet-default", "c2").Matches(labels.Set(c.Labels)) {
		t.Error("c2's selector selects c1's copy")
	}
	if UnlabelledSelector().Matches(labels.Set(c.Labels)) {
		t.Error("UnlabelledSelector selects a labelled copy")
	}
	delete(c.Labels, LabelClusterHash)
	if !UnlabelledSelector().Matches(labels.Set(c.Labels)) {
		t.Error("UnlabelledSelector does not select a copy without the label")
	}
}

func TestAdoptWriter(t *testing.T) {
	op := types.NamespacedName{Namespace: "fleet-default", Name: "op"}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	forC := func(cluster string, keep bool) *corev1.Secret {
		return Secret(src, "apps", Owner{UpstreamID: "up-1", HelmOp: op, Cluster: cluster, Keep: keep})
	}
	legacyC := func(cluster string) *corev1.Secret { // written before the cluster hash
		s := forC(cluster, false)
		delete(s.Labels, LabelClusterHash)
		s.Annotations[LegacyAnnotationCluster] = cluster
		return s
	}
	tests := []struct {
		name      string
		want, cur *corev1.Secret
		result    *corev1.Secret
	}{
		{"another Cluster's copy keeps its writer", forC("c2", false), forC("c1", false), forC("c1", false)},
		{"and its keep marker", forC("c2", false), forC("c1", true), forC("c1", true)},
		{"and its lack of one", forC("c2", true), forC("c1", false), forC("c1", false)},
		{"own copy: nothing adopted", forC("c1", true), forC("c1", false), forC("c1", true)},
		{"copy naming no Cluster: nothing adopted", forC("c2", false), forC("", false), forC("c2", false)},
		{"legacy copy of another Cluster: its annotation adopted, the label left to it", forC("c2", false), legacyC("c1"), legacyC("c1")},
		{"legacy copy of its own Cluster: nothing adopted, relabelled", forC("c1", false), legacyC("c1"), forC("c1", false)},
		{"labelled copy of another Cluster with a stale legacy annotation: the hash decides", forC("c2", false),
			func() *corev1.Secret { s := forC("c1", false); s.Annotations[LegacyAnnotationCluster] = "c1"; return s }(), forC("c1", false)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			AdoptWriter(tc.want, tc.cur)
			if !SecretUpToDate(tc.want, tc.result) || !SecretUpToDate(tc.result, tc.want) {
				t.Errorf("got labels %v annotations %v, want %v %v", tc.want.Labels, tc.want.Annotations, tc.result.Labels, tc.result.Annotations)
			}
		})
	}
}

func TestFleetCopy(t *testing.T) {
	if bd, ok := FleetCopy(&metav1.ObjectMeta{Labels: map[string]string{FleetCopyLabel: "app-c1"}}); !ok || bd != "app-c1" {
		t.Errorf("FleetCopy = %q, %v", bd, ok)
	}
	if _, ok := FleetCopy(&metav1.ObjectMeta{Labels: map[string]string{LabelManagedBy: ManagedByValue}}); ok {
		t.Error("Courier's copy taken for Fleet's")
	}
	// A copy of Courier's that carries Fleet's label (taken from its
	// source before that label was filtered) is Courier's to correct.
	both := &metav1.ObjectMeta{Labels: map[string]string{LabelManagedBy: ManagedByValue, FleetCopyLabel: "app-c1"}}
	if _, ok := FleetCopy(both); ok {
		t.Error("Courier's copy carrying Fleet's label taken for Fleet's")
	}
}

// The hash cache gives what sha256 gives, and stays bounded however many
// distinct claims copies carry.
func TestHashCacheBounded(t *testing.T) {
	h := &hashCache{byInput: map[string]string{}}
	direct := func(a, b, c string) string {
		sum := sha256.Sum256([]byte(a + "\x00" + b + "\x00" + c))
		return hex.EncodeToString(sum[:])[:40]
	}
	for i := range 2*hashCacheSize + 1 {
		name := fmt.Sprintf("op-%d", i)
		for range 2 { // computed, then from the cache
			if got, want := h.of("up", "ns", name), direct("up", "ns", name); got != want {
				t.Fatalf("hash of %s = %s, want %s", name, got, want)
			}
		}
	}
	if n := len(h.byInput); n > hashCacheSize || n == 0 {
		t.Errorf("the cache holds %d entries, want 1..%d", n, hashCacheSize)
	}
}

// A Bundle's copies name the Bundle, claim it, and are never another
// owner's: not the HelmOp of the same name, nor a copy claiming both.
func TestBundleOwner(t *testing.T) {
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ws", ResourceVersion: "7"}}
	bundle := Owner{UpstreamID: "up", HelmOp: types.NamespacedName{Namespace: "ws", Name: "bundle:app"}, Cluster: "c"}
	helmOp := Owner{UpstreamID: "up", HelmOp: types.NamespacedName{Namespace: "ws", Name: "app"}, Cluster: "c"}
	cp := Secret(src, "default", bundle)
	if got := cp.Annotations[AnnotationBundle]; got != "ws/app" {
		t.Errorf("bundle annotation = %q, want ws/app", got)
	}
	if _, ok := cp.Annotations[AnnotationHelmOp]; ok {
		t.Errorf("a Bundle's copy names a HelmOp: %v", cp.Annotations)
	}
	if got := OwnershipOf(cp, bundle); got != OwnedBy {
		t.Errorf("OwnershipOf(bundle's copy, bundle) = %v", got)
	}
	if got := OwnershipOf(cp, helmOp); got != OtherOwner {
		t.Errorf("OwnershipOf(bundle's copy, HelmOp of the same name) = %v, want OtherOwner", got)
	}
	claim, ok := ClaimedOwner(cp)
	if !ok || claim.HelmOp != bundle.HelmOp {
		t.Errorf("ClaimedOwner = %+v, %v; want %v", claim, ok, bundle.HelmOp)
	}
	both := cp.DeepCopy()
	both.Annotations[AnnotationHelmOp] = "ws/bundle:app"
	if _, ok := ClaimedOwner(both); ok {
		t.Errorf("a copy claiming a HelmOp and a Bundle was claimed")
	}
}
