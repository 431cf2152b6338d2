// Package agentauth is Courier's own authorizer for pull delivery (docs/design.md#pull-delivery),
// in the pattern of the kube-apiserver's Node authorizer: the upstream
// RBAC lets courier-agents reach Courier at all, and this authorizer narrows
// each agent to the rows of its own Fleet Cluster.
//
// It only ever denies. Placed in front of the delegated (SubjectAccessReview)
// authorizer with union semantics, it answers Deny or NoOpinion, so every
// request it lets through must still be allowed by the upstream RBAC (asked
// once per agent and kind of request, and remembered: allowcache.go):
//
//   - The user a Cluster's agent annotation names (delivery.Of,
//     docs/design.md#pull-delivery) is that Cluster's agent. An agent may get, list and watch downstreamcopies in
//     its Cluster's namespace (list and watch only with a field selector
//     pinning spec.cluster to its Cluster; get only of its Cluster's rows),
//     get downstreamcopies/payload and update downstreamcopies/status of its
//     Cluster's rows, and read discovery and OpenAPI. Everything else is
//     denied.
//   - downstreamcopies/payload is denied to everyone who is not the agent of
//     the row's Cluster, cluster-admins and system:masters included: a
//     payload is the Secret itself.
//   - Anything else gets no opinion, and the delegated authorizer decides.
package agentauth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// Agents tells which Fleet Clusters a user is the agent of.
type Agents interface {
	// ClustersOf returns the Clusters whose agent is username, as
	// delivery.Of answers (docs/design.md#pull-delivery).
	ClustersOf(username string) []types.NamespacedName
	// HasSynced reports whether the Clusters have been read: before that
	// no one can be told apart from an agent.
	HasSynced() bool
}

// Rows tells which Cluster a downstreamcopies row belongs to.
type Rows interface {
	// ClusterOf returns spec.cluster of the row namespace/name, and false
	// when there is no such row.
	ClusterOf(namespace, name string) (cluster string, ok bool)
}

const (
	resource = "downstreamcopies"
	// SubresourcePayload is downstreamcopies/<row>/payload.
	SubresourcePayload = "payload"
	// SubresourceStatus is downstreamcopies/<row>/status.
	SubresourceStatus = "status"
	// clusterField is the field selector an agent's list and watch must pin.
	clusterField = "spec.cluster"
)

// Authorizer is the deny-only agent authorizer. Put it in front of the
// delegated authorizer with WithDelegate.
type Authorizer struct {
	agents Agents
	rows   Rows
}

var _ authorizer.Authorizer = &Authorizer{}

// New returns the agent authorizer over the Cluster index agents and the
// rows.
func New(agents Agents, rows Rows) *Authorizer {
	return &Authorizer{agents: agents, rows: rows}
}

// Authorize implements authorizer.Authorizer: DecisionDeny with a reason,
// or DecisionNoOpinion. It never allows.
func (a *Authorizer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	ours := isDownstreamCopies(attrs)
	if ours && !a.agents.HasSynced() {
		// Until the Clusters are read an agent looks like anyone else, and
		// the upstream RBAC alone would decide.
		return authorizer.DecisionDeny, "Courier has not read the Fleet Clusters yet, so it cannot tell agents apart; retry shortly", nil
	}
	clusters := a.clustersOf(attrs.GetUser())
	if len(clusters) > 0 {
		return a.authorizeAgent(attrs, attrs.GetUser().GetName(), clusters)
	}
	if ours && attrs.GetSubresource() == SubresourcePayload {
		return authorizer.DecisionDeny, fmt.Sprintf("payloads are served only to the agent of the row's Cluster (the user its %s annotation names); %s is not an agent",
			courier.AnnotationAgentUser, describeUser(attrs.GetUser())), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: this
// authorizer has no conditions, so it is Authorize's decision.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: there are no
// conditions to evaluate, so it fails closed.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// IsAgentOf reports whether u is the agent of the Cluster namespace/cluster.
// The payload storage asks it again, so that a payload is never served to
// anyone else even if the authorizer chain were wired differently.
func (a *Authorizer) IsAgentOf(u user.Info, namespace, cluster string) bool {
	return slices.Contains(a.clustersOf(u), types.NamespacedName{Namespace: namespace, Name: cluster})
}

// ownRequest reports whether attrs is an agent's request for its own
// Cluster's rows that this authorizer lets through: the only requests the
// allow cache answers.
func (a *Authorizer) ownRequest(attrs authorizer.Attributes) bool {
	if !isDownstreamCopies(attrs) || !a.agents.HasSynced() {
		return false
	}
	clusters := a.clustersOf(attrs.GetUser())
	if len(clusters) == 0 {
		return false
	}
	decision, _, _ := a.authorizeAgent(attrs, attrs.GetUser().GetName(), clusters)
	return decision == authorizer.DecisionNoOpinion
}

// clustersOf returns the Clusters u is the agent of. Anonymous and
// unauthenticated requests are never an agent's, whatever a Cluster's
// annotation says.
func (a *Authorizer) clustersOf(u user.Info) []types.NamespacedName {
	if u == nil || u.GetName() == "" || u.GetName() == user.Anonymous || slices.Contains(u.GetGroups(), user.AllUnauthenticated) {
		return nil
	}
	return a.agents.ClustersOf(u.GetName())
}

// authorizeAgent decides a request by the agent of clusters.
func (a *Authorizer) authorizeAgent(attrs authorizer.Attributes, username string, clusters []types.NamespacedName) (authorizer.Decision, string, error) {
	deny := func(format string, args ...any) (authorizer.Decision, string, error) {
		return authorizer.DecisionDeny, fmt.Sprintf("user %q is the courier-agent of Cluster %s: ", username, clusterList(clusters)) + fmt.Sprintf(format, args...), nil
	}
	if !attrs.IsResourceRequest() {
		if attrs.GetVerb() == "get" && isDiscovery(attrs.GetPath()) {
			return authorizer.DecisionNoOpinion, "", nil
		}
		return deny("it may read only discovery, OpenAPI and its Cluster's downstreamcopies, not %s %s", attrs.GetVerb(), attrs.GetPath())
	}
	if !isDownstreamCopies(attrs) {
		return deny("it may use only its Cluster's downstreamcopies, not %s", describeResource(attrs))
	}
	ns := attrs.GetNamespace()
	switch verb, sub := attrs.GetVerb(), attrs.GetSubresource(); {
	case sub == "" && (verb == "list" || verb == "watch"):
		pinned, err := pinnedClusters(attrs)
		if err != nil {
			return deny("its field selector cannot be read: %v", err)
		}
		for _, c := range pinned {
			if slices.Contains(clusters, types.NamespacedName{Namespace: ns, Name: c}) {
				return authorizer.DecisionNoOpinion, "", nil
			}
		}
		return deny("it may %s downstreamcopies only in its Cluster's namespace with fieldSelector %s=<its Cluster>", verb, clusterField)
	case sub == "" && verb == "get", sub == SubresourcePayload && verb == "get", sub == SubresourceStatus && verb == "update":
		if cluster, ok := a.rows.ClusterOf(ns, attrs.GetName()); ok && slices.Contains(clusters, types.NamespacedName{Namespace: ns, Name: cluster}) {
			return authorizer.DecisionNoOpinion, "", nil
		}
		// Whether the row exists is not said: it would tell the agent
		// about other Clusters' rows.
		return deny("downstreamcopies %s/%s is not a row of its Cluster", ns, attrs.GetName())
	}
	return deny("it may get, list and watch downstreamcopies, get downstreamcopies/payload and update downstreamcopies/status, not %s", describeResource(attrs))
}

// pinnedClusters returns the values the request's field selector requires
// spec.cluster to equal. The requirements are ANDed, so a request that pins
// spec.cluster to one value can only return rows of that Cluster, whatever
// else it asks for.
func pinnedClusters(attrs authorizer.Attributes) ([]string, error) {
	reqs, err := attrs.GetFieldSelector()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range reqs {
		if r.Field == clusterField && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			out = append(out, r.Value)
		}
	}
	return out, nil
}

func isDownstreamCopies(attrs authorizer.Attributes) bool {
	return attrs.IsResourceRequest() && attrs.GetAPIGroup() == courier.GroupName && attrs.GetResource() == resource
}

// isDiscovery reports whether a non-resource path only describes the API:
// discovery, OpenAPI and the version.
func isDiscovery(path string) bool {
	switch {
	case path == "/api", path == "/apis", path == "/version", path == "/openapi/v2", path == "/openapi/v3":
		return true
	case strings.HasPrefix(path, "/apis/"), strings.HasPrefix(path, "/api/"), strings.HasPrefix(path, "/openapi/v3/"):
		// A non-resource request under /apis or /api is group or version
		// discovery: anything naming a resource is a resource request.
		return true
	}
	return false
}

func describeResource(attrs authorizer.Attributes) string {
	r := attrs.GetResource()
	if attrs.GetAPIGroup() != "" {
		r += "." + attrs.GetAPIGroup()
	}
	if attrs.GetSubresource() != "" {
		r += "/" + attrs.GetSubresource()
	}
	return attrs.GetVerb() + " " + r
}

func describeUser(u user.Info) string {
	if u == nil || u.GetName() == "" {
		return "an unauthenticated request"
	}
	return fmt.Sprintf("user %q", u.GetName())
}

func clusterList(clusters []types.NamespacedName) string {
	names := make([]string, len(clusters))
	for i, c := range clusters {
		names[i] = c.String()
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
