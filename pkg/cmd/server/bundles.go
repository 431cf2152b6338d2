package server

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	fleetv1alpha1 "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
)

// servesBundles reports whether the upstream serves fleet.cattle.io
// Bundles. Courier reads Bundles as sources' owners (docs/design.md#inputs) where they
// exist; a management cluster with only Courier's older CRDs (HelmOp,
// Cluster, ClusterGroup) serves none, and an informer on a resource that
// is not served would never sync and hold the whole view back. Such a
// cluster is read without Bundles; installing the Bundle CRD later takes
// a restart of Courier to be seen (the log says so).
func servesBundles(config *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(fleetv1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", fleetv1alpha1.SchemeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "bundles" {
			return true, nil
		}
	}
	return false, nil
}

// bundleLister is the Bundles' lister when the upstream serves them, else
// nil (the informer is then never made, so never waited for).
func (v *views) bundleLister() fleetlisters.BundleLister {
	if !v.readBundles {
		return nil
	}
	return v.fleetInformers.Fleet().V1alpha1().Bundles().Lister()
}
