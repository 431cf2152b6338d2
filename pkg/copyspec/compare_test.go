package copyspec

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/copydigest"
)

func wantSecret() *corev1.Secret {
	return Secret(&corev1.Secret{
		ObjectMeta: sourceMeta("s"),
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}, "apps", owner)
}

func wantConfigMap() *corev1.ConfigMap {
	return ConfigMap(&corev1.ConfigMap{
		ObjectMeta: sourceMeta("c"),
		Data:       map[string]string{"a": "1"},
		BinaryData: map[string][]byte{"b": {1}},
	}, "apps", owner)
}

// asStored is want as read back from the API server: server-set fields
// filled in, which UpToDate must ignore.
func asStored(m *metav1.ObjectMeta) {
	m.ResourceVersion = "100"
	m.UID = "copy-uid"
	m.CreationTimestamp = metav1.Unix(2000, 0)
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "courier"}}
}

func TestSecretUpToDate(t *testing.T) {
	tests := []struct {
		name string
		want func(*corev1.Secret)
		cur  func(*corev1.Secret)
		ok   bool
	}{
		{"equal", nil, nil, true},
		{"nil vs empty data", func(s *corev1.Secret) { s.Data = map[string][]byte{} }, func(s *corev1.Secret) { s.Data = nil }, true},
		{"empty vs nil data", func(s *corev1.Secret) { s.Data = nil }, func(s *corev1.Secret) { s.Data = map[string][]byte{} }, true},
		{"empty type vs defaulted Opaque", func(s *corev1.Secret) { s.Type = "" }, func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, true},
		{"immutable nil vs false", nil, func(s *corev1.Secret) { s.Immutable = ptrBool(false) }, true},
		{"type differs", nil, func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, false},
		{"data value differs", nil, func(s *corev1.Secret) { s.Data[corev1.DockerConfigJsonKey] = []byte("{}") }, false},
		{"data key extra", nil, func(s *corev1.Secret) { s.Data["x"] = nil }, false},
		{"data key missing", nil, func(s *corev1.Secret) { s.Data = map[string][]byte{} }, false},
		{"immutable differs", nil, func(s *corev1.Secret) { s.Immutable = ptrBool(true) }, false},
		{"label value differs", nil, func(s *corev1.Secret) { s.Labels["app"] = "other" }, false},
		{"label extra", nil, func(s *corev1.Secret) { s.Labels["added"] = "downstream" }, false},
		{"label missing", nil, func(s *corev1.Secret) { delete(s.Labels, LabelOwner) }, false},
		{"annotation extra", nil, func(s *corev1.Secret) { s.Annotations["added"] = "downstream" }, false},
		{"annotation missing", nil, func(s *corev1.Secret) { delete(s.Annotations, "note") }, false},
		{"source resource version differs", nil, func(s *corev1.Secret) { s.Annotations[AnnotationSourceResourceVersion] = "41" }, false},
		{"keep differs", nil, func(s *corev1.Secret) { s.Annotations[AnnotationKeep] = "true" }, false},
		// Copies written before the legacy annotation was dropped are not
		// rewritten only to remove it; anything else beside it still is.
		{"legacy cluster annotation left on the copy", nil, func(s *corev1.Secret) { s.Annotations[LegacyAnnotationCluster] = "c1" }, true},
		{"legacy annotation and another extra", nil, func(s *corev1.Secret) {
			s.Annotations[LegacyAnnotationCluster] = "c1"
			s.Annotations["added"] = "downstream"
		}, false},
		{"legacy annotation and one missing", nil, func(s *corev1.Secret) {
			s.Annotations[LegacyAnnotationCluster] = "c1"
			delete(s.Annotations, "note")
		}, false},
		{"legacy annotation wanted (adopted) but absent", func(s *corev1.Secret) { s.Annotations[LegacyAnnotationCluster] = "c1" },
			func(s *corev1.Secret) { delete(s.Annotations, LegacyAnnotationCluster) }, false},
		{"legacy annotation wanted, another value", func(s *corev1.Secret) { s.Annotations[LegacyAnnotationCluster] = "c1" },
			func(s *corev1.Secret) { s.Annotations[LegacyAnnotationCluster] = "c2" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := wantSecret()
			if tt.want != nil {
				tt.want(want)
			}
			cur := want.DeepCopy()
			asStored(&cur.ObjectMeta)
			if tt.cur != nil {
				tt.cur(cur)
			}
			forms(cur, func(form string, cur *corev1.Secret) {
				if got := SecretUpToDate(cur, want); got != tt.ok {
					t.Errorf("%s: SecretUpToDate() = %v, want %v", form, got, tt.ok)
				}
			})
		})
	}
}

func TestConfigMapUpToDate(t *testing.T) {
	tests := []struct {
		name string
		want func(*corev1.ConfigMap)
		cur  func(*corev1.ConfigMap)
		ok   bool
	}{
		{"equal", nil, nil, true},
		{"nil vs empty data and binaryData", func(c *corev1.ConfigMap) {
			c.Data, c.BinaryData = map[string]string{}, map[string][]byte{}
		}, func(c *corev1.ConfigMap) { c.Data, c.BinaryData = nil, nil }, true},
		{"empty vs nil data and binaryData", func(c *corev1.ConfigMap) { c.Data, c.BinaryData = nil, nil }, func(c *corev1.ConfigMap) {
			c.Data, c.BinaryData = map[string]string{}, map[string][]byte{}
		}, true},
		{"data value differs", nil, func(c *corev1.ConfigMap) { c.Data["a"] = "2" }, false},
		{"data key extra", nil, func(c *corev1.ConfigMap) { c.Data["z"] = "" }, false},
		{"binaryData value differs", nil, func(c *corev1.ConfigMap) { c.BinaryData["b"] = []byte{2} }, false},
		{"binaryData missing", nil, func(c *corev1.ConfigMap) { c.BinaryData = nil }, false},
		{"immutable differs", nil, func(c *corev1.ConfigMap) { c.Immutable = ptrBool(true) }, false},
		{"label extra", nil, func(c *corev1.ConfigMap) { c.Labels["added"] = "x" }, false},
		{"label value differs", nil, func(c *corev1.ConfigMap) { c.Labels[LabelOwner] = "forged" }, false},
		{"annotation extra", nil, func(c *corev1.ConfigMap) { c.Annotations[lastApplied] = "{}" }, false},
		{"annotation value differs", nil, func(c *corev1.ConfigMap) { c.Annotations[AnnotationHelmOp] = "x/y" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := wantConfigMap()
			if tt.want != nil {
				tt.want(want)
			}
			cur := want.DeepCopy()
			asStored(&cur.ObjectMeta)
			if tt.cur != nil {
				tt.cur(cur)
			}
			forms(cur, func(form string, cur *corev1.ConfigMap) {
				if got := ConfigMapUpToDate(cur, want); got != tt.ok {
					t.Errorf("%s: ConfigMapUpToDate() = %v, want %v", form, got, tt.ok)
				}
			})
		})
	}
}

func TestSecretNeedsRecreate(t *testing.T) {
	tests := []struct {
		name string
		cur  func(*corev1.Secret) // applied to a copy of wantSecret()
		want func(*corev1.Secret)
		ok   bool
	}{
		{"mutable, data differs: plain update", func(s *corev1.Secret) { s.Data = nil }, nil, false},
		{"mutable becoming immutable: plain update", nil, func(s *corev1.Secret) { s.Immutable = ptrBool(true) }, false},
		{"immutable, only labels differ: plain update", func(s *corev1.Secret) {
			s.Immutable = ptrBool(true)
			s.Labels["x"] = "y"
		}, func(s *corev1.Secret) { s.Immutable = ptrBool(true) }, false},
		{"immutable, same content", func(s *corev1.Secret) { s.Immutable = ptrBool(true) }, func(s *corev1.Secret) { s.Immutable = ptrBool(true) }, false},
		{"immutable, data differs", func(s *corev1.Secret) {
			s.Immutable = ptrBool(true)
			s.Data["k"] = []byte("old")
		}, func(s *corev1.Secret) { s.Immutable = ptrBool(true) }, true},
		{"immutable, want mutable", func(s *corev1.Secret) { s.Immutable = ptrBool(true) }, nil, true},
		{"type differs, mutable: type is always immutable", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, nil, true},
		{"empty type vs Opaque is no change", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, func(s *corev1.Secret) { s.Type = "" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := wantSecret()
			if tt.want != nil {
				tt.want(want)
			}
			cur := wantSecret()
			asStored(&cur.ObjectMeta)
			if tt.cur != nil {
				tt.cur(cur)
			}
			forms(cur, func(form string, cur *corev1.Secret) {
				if got := SecretNeedsRecreate(cur, want); got != tt.ok {
					t.Errorf("%s: SecretNeedsRecreate() = %v, want %v", form, got, tt.ok)
				}
			})
		})
	}
}

func TestConfigMapNeedsRecreate(t *testing.T) {
	immutable := func(c *corev1.ConfigMap) { c.Immutable = ptrBool(true) }
	tests := []struct {
		name string
		cur  func(*corev1.ConfigMap)
		want func(*corev1.ConfigMap)
		ok   bool
	}{
		{"mutable, data differs", func(c *corev1.ConfigMap) { c.Data["a"] = "old" }, nil, false},
		{"mutable becoming immutable", nil, immutable, false},
		{"immutable, only annotations differ", func(c *corev1.ConfigMap) {
			immutable(c)
			c.Annotations["x"] = "y"
		}, immutable, false},
		{"immutable, data differs", func(c *corev1.ConfigMap) {
			immutable(c)
			c.Data["a"] = "old"
		}, immutable, true},
		{"immutable, binaryData differs", func(c *corev1.ConfigMap) {
			immutable(c)
			c.BinaryData = nil
		}, immutable, true},
		{"immutable, want mutable", immutable, func(c *corev1.ConfigMap) { c.Immutable = ptrBool(false) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := wantConfigMap()
			if tt.want != nil {
				tt.want(want)
			}
			cur := wantConfigMap()
			asStored(&cur.ObjectMeta)
			if tt.cur != nil {
				tt.cur(cur)
			}
			forms(cur, func(form string, cur *corev1.ConfigMap) {
				if got := ConfigMapNeedsRecreate(cur, want); got != tt.ok {
					t.Errorf("%s: ConfigMapNeedsRecreate() = %v, want %v", form, got, tt.ok)
				}
			})
		})
	}
}

// forms calls check with cur as read from the API server and as a
// downstream cache holds it, its data replaced by a digest
// (pkg/copydigest): every comparison must answer the same for both.
func forms[T *corev1.Secret | *corev1.ConfigMap](cur T, check func(form string, cur T)) {
	check("as read", cur)
	var cached any
	switch c := any(cur).(type) {
	case *corev1.Secret:
		d := c.DeepCopy()
		copydigest.ReplaceSecretData(d)
		cached = d
	case *corev1.ConfigMap:
		d := c.DeepCopy()
		copydigest.ReplaceConfigMapData(d)
		cached = d
	}
	check("as cached", cached.(T))
}
