package agentauth

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Reviewer asks the upstream one SubjectAccessReview per question and keeps
// nothing: the allow cache, its only caller, keeps the answers. The
// webhook authorizer the delegated options build keeps every answer it
// receives, expired or not, in an LRU of 8,192, so as the allow cache's
// reviewer it held a second copy of each agent's coarse answer -- about
// 1.6 KiB of a replica's heap per agent, kept while it watched.
//
// It asks only what coarse builds: a resource request, no name, no
// selectors. An error or a refusal is NoOpinion: the allow cache then
// leaves the request to the delegated authorizer, which retries.
type Reviewer struct {
	Client authorizationv1client.SubjectAccessReviewInterface
}

var _ authorizer.Authorizer = Reviewer{}

// Authorize implements authorizer.Authorizer: Allow when the upstream
// allows, otherwise NoOpinion.
func (r Reviewer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if !attrs.IsResourceRequest() || attrs.GetName() != "" {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("agents' reviewer: only questions for every name of a resource are asked")
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: reviewSpec(attrs)}
	got, err := r.Client.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("agents' reviewer: %w", err)
	}
	if got.Status.Allowed && !got.Status.Denied {
		return authorizer.DecisionAllow, got.Status.Reason, nil
	}
	return authorizer.DecisionNoOpinion, got.Status.Reason, nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: the upstream's
// answer has no conditions.
func (r Reviewer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: there are no
// conditions to evaluate, so it fails closed.
func (r Reviewer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// reviewSpec is the review of attrs: the user as authenticated (name, UID,
// groups, extra) and the resource question.
func reviewSpec(attrs authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	u := attrs.GetUser()
	spec := authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace:   attrs.GetNamespace(),
			Verb:        attrs.GetVerb(),
			Group:       attrs.GetAPIGroup(),
			Version:     attrs.GetAPIVersion(),
			Resource:    attrs.GetResource(),
			Subresource: attrs.GetSubresource(),
		},
	}
	if u == nil {
		return spec
	}
	spec.User, spec.UID, spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
	if extra := u.GetExtra(); len(extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
		for k, v := range extra {
			spec.Extra[k] = v
		}
	}
	return spec
}
