package downstream

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/copydigest"
	"github.com/courier-dev/courier/pkg/copyspec"
)

// The informers' transforms: Courier's own copies are cached with a digest
// of their data (a pass compares it with the source's) and without managed
// fields; foreign objects without either. Labels and annotations, which
// every decision reads, stay.
func TestCacheTransforms(t *testing.T) {
	data := map[string][]byte{"k": []byte("v")}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "db", Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "courier"}}}
	}
	tests := []struct {
		name      string
		transform func(any) (any, error)
		// data says what is left of the data: "digest" or "none".
		data string
	}{
		{name: "own copies", transform: digestData, data: "digest"},
		{name: "foreign objects", transform: dropData, data: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.transform(&corev1.Secret{ObjectMeta: meta(), Data: data})
			if err != nil {
				t.Fatal(err)
			}
			s := out.(*corev1.Secret)
			if len(s.ManagedFields) != 0 {
				t.Errorf("managed fields kept: %v", s.ManagedFields)
			}
			if s.Labels["l"] != "v" || s.Annotations["a"] != "v" {
				t.Errorf("labels or annotations lost: %v %v", s.Labels, s.Annotations)
			}
			switch tt.data {
			case "digest":
				if !copydigest.Digested(s.Data) {
					t.Fatalf("data = %v, want its digest alone", s.Data)
				}
				if !copyspec.SecretDataEqual(s, &corev1.Secret{Data: data}) {
					t.Error("the cached copy does not compare equal to its own data")
				}
				// client-go applies a transform twice to what a streaming
				// list delivers (its temporary store, then Replace).
				if _, err := tt.transform(s); err != nil || !copyspec.SecretDataEqual(s, &corev1.Secret{Data: data}) {
					t.Errorf("transformed twice, the cached copy no longer compares equal to its data (err %v)", err)
				}
				if copyspec.SecretDataEqual(s, &corev1.Secret{Data: map[string][]byte{"k": []byte("w")}}) {
					t.Error("the cached copy compares equal to other data")
				}
			case "none":
				if s.Data != nil {
					t.Errorf("data kept: %v", s.Data)
				}
			}

			cm, err := tt.transform(&corev1.ConfigMap{ObjectMeta: meta(), Data: map[string]string{"k": "v"}, BinaryData: data})
			if err != nil {
				t.Fatal(err)
			}
			c := cm.(*corev1.ConfigMap)
			switch tt.data {
			case "digest":
				if c.Data != nil || !copydigest.Digested(c.BinaryData) {
					t.Fatalf("data %v, binaryData %v, want the digest alone", c.Data, c.BinaryData)
				}
				if !copyspec.ConfigMapDataEqual(c, &corev1.ConfigMap{Data: map[string]string{"k": "v"}, BinaryData: data}) {
					t.Error("the cached ConfigMap does not compare equal to its own data")
				}
			case "none":
				if c.Data != nil || c.BinaryData != nil {
					t.Errorf("data kept: %v %v", c.Data, c.BinaryData)
				}
			}
		})
	}
}
