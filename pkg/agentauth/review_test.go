package agentauth

import (
	"context"
	"errors"
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestReviewer(t *testing.T) {
	agent := &user.DefaultInfo{
		Name:   "agent-1",
		UID:    "u-1",
		Groups: []string{"courier:agents", "system:authenticated"},
		Extra:  map[string][]string{"scopes": {"a", "b"}},
	}
	question := authorizer.AttributesRecord{
		User: agent, Verb: "update", Namespace: "fleet-default",
		APIGroup: "courier.dev", APIVersion: "v1alpha1",
		Resource: "downstreamcopies", Subresource: "status", ResourceRequest: true,
	}
	wantSpec := authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "fleet-default", Verb: "update", Group: "courier.dev", Version: "v1alpha1",
			Resource: "downstreamcopies", Subresource: "status",
		},
		User: "agent-1", UID: "u-1", Groups: []string{"courier:agents", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"a", "b"}},
	}
	named := question
	named.Name = "row-1"

	for _, tc := range []struct {
		name      string
		attrs     authorizer.Attributes
		status    authorizationv1.SubjectAccessReviewStatus
		createErr error
		want      authorizer.Decision
		wantErr   bool
		wantAsked int
	}{
		{name: "allowed", attrs: question, status: authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC"}, want: authorizer.DecisionAllow, wantAsked: 1},
		{name: "not allowed", attrs: question, status: authorizationv1.SubjectAccessReviewStatus{}, want: authorizer.DecisionNoOpinion, wantAsked: 1},
		{name: "allowed and denied", attrs: question, status: authorizationv1.SubjectAccessReviewStatus{Allowed: true, Denied: true}, want: authorizer.DecisionNoOpinion, wantAsked: 1},
		{name: "upstream error", attrs: question, createErr: errors.New("connection refused"), want: authorizer.DecisionNoOpinion, wantErr: true, wantAsked: 1},
		{name: "a named question is not asked", attrs: named, want: authorizer.DecisionNoOpinion, wantErr: true, wantAsked: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var asked []authorizationv1.SubjectAccessReviewSpec
			client.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
				sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
				asked = append(asked, sar.Spec)
				if tc.createErr != nil {
					return true, nil, tc.createErr
				}
				return true, &authorizationv1.SubjectAccessReview{Spec: sar.Spec, Status: tc.status}, nil
			})
			r := Reviewer{Client: client.AuthorizationV1().SubjectAccessReviews()}
			got, _, err := r.Authorize(context.Background(), tc.attrs)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("Authorize = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
			if len(asked) != tc.wantAsked {
				t.Fatalf("asked the upstream %d times, want %d", len(asked), tc.wantAsked)
			}
			if tc.wantAsked > 0 && !reflect.DeepEqual(asked[0], wantSpec) {
				t.Errorf("asked %+v\nwant %+v", asked[0], wantSpec)
			}
		})
	}
}

// TestReviewerAnswersTheAllowCachesQuestion: the question the allow cache
// builds is one the reviewer asks.
func TestReviewerAnswersTheAllowCachesQuestion(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	request := authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: "agent-1"}, Verb: "get", Namespace: "fleet-default",
		APIGroup: "courier.dev", APIVersion: "v1alpha1", Resource: "downstreamcopies",
		Subresource: "payload", Name: "row-1", ResourceRequest: true,
	}
	got, _, err := Reviewer{Client: client.AuthorizationV1().SubjectAccessReviews()}.Authorize(context.Background(), coarse(request))
	if got != authorizer.DecisionAllow || err != nil {
		t.Errorf("Authorize(coarse(named request)) = %v, %v; want Allow", got, err)
	}
}
