package downstream

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The informers' transforms: Courier's own copies are cached with their
// data (a pass compares it) but without managed fields; foreign objects
// without either. Labels and annotations, which every decision reads,
// stay.
func TestCacheTransforms(t *testing.T) {
	newSecret := func() *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "courier"}}},
			Data: map[string][]byte{"k": []byte("v")},
		}
	}
	tests := []struct {
		name      string
		transform func(any) (any, error)
		wantData  bool
	}{
		{name: "own copies", transform: dropManagedFields, wantData: true},
		{name: "foreign objects", transform: dropData, wantData: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.transform(newSecret())
			if err != nil {
				t.Fatal(err)
			}
			s := out.(*corev1.Secret)
			if len(s.ManagedFields) != 0 {
				t.Errorf("managed fields kept: %v", s.ManagedFields)
			}
			if (s.Data != nil) != tt.wantData {
				t.Errorf("data kept = %v, want %v", s.Data != nil, tt.wantData)
			}
			if s.Labels["l"] != "v" || s.Annotations["a"] != "v" {
				t.Errorf("labels or annotations lost: %v %v", s.Labels, s.Annotations)
			}
		})
	}
}
