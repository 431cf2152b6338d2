package server

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func TestSourceVersions(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	obj := func(kind, name, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, ResourceVersion: rv}}
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, obj("Secret", "s", "7"), obj("ConfigMap", "m", "9"))
	r := sourceVersions{client: client}
	for _, tc := range []struct {
		kind, name string
		rv         string
		exists     bool
	}{
		{"Secret", "s", "7", true},
		{"secret", "s", "7", true},
		{"ConfigMap", "m", "9", true},
		{"Secret", "m", "", false},
		{"Deployment", "s", "", false},
	} {
		rv, exists, err := r.SourceVersion(context.Background(), "ws", tc.kind, tc.name)
		if err != nil || rv != tc.rv || exists != tc.exists {
			t.Errorf("%s %s: %q %v %v, want %q %v", tc.kind, tc.name, rv, exists, err, tc.rv, tc.exists)
		}
	}
}
