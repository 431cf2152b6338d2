package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/courier-dev/courier/pkg/apis/courier/install"
)

var (
	// Scheme holds the courier.dev types the server serves, plus the
	// unversioned meta types every API server answers with.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes with Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)
	// downstreamcopies/<row>/payload answers with the core/v1 Secret or
	// ConfigMap a courier-agent writes downstream. Only these two core
	// kinds are known here.
	Scheme.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.Secret{}, &corev1.ConfigMap{})

	// The unversioned types the generic API server needs for discovery,
	// errors and options, registered as sample-apiserver does.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}
