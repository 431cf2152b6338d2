package v1alpha1

// SystemNamespace is Fleet's own namespace: fleet-controller's upstream,
// and fleet-agent's in a downstream cluster, where the ServiceAccounts a
// HelmOp names (and the fallback fleet-default) live. Courier's
// --agent-namespace and courier-agent's default to it, and a Cluster may
// name a kubeconfig Secret in it (docs/design.md#inputs, docs/design.md#rules-of-behaviour).
const SystemNamespace = "cattle-fleet-system"
