package v1alpha1

// KubeconfigSecretRef returns where a Cluster's kubeconfig Secret is read
// from: spec.kubeConfigSecretNamespace, else the Cluster's own namespace
// (docs/design.md#inputs), and spec.kubeConfigSecret. name is "" when the Cluster names
// none.
func (c *Cluster) KubeconfigSecretRef() (namespace, name string) {
	namespace = c.Spec.KubeConfigSecretNamespace
	if namespace == "" {
		namespace = c.Namespace
	}
	return namespace, c.Spec.KubeConfigSecret
}
