// Package install registers every version of the courier.dev API group.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

// Install registers the internal and v1alpha1 types of courier.dev with a
// scheme and makes v1alpha1 the preferred version.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(courier.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1alpha1.SchemeGroupVersion))
}
