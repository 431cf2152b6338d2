package engine

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// impersonated is the clientset the engine gets for one ServiceAccount:
// it reads and writes the downstream cluster's objects and answers
// SelfSubjectAccessReviews from a list of what that user may do.
type impersonated struct {
	user string
	cs   *fake.Clientset
}

// impersonation makes the engine's impersonated clients fakes over the
// downstream cluster's store. allowed says what each user may do, as
// "<verb> <resource> <namespace-or-name>".
func impersonation(env *testEnv, down *fakeCluster, allowed map[string][]string) *[]*impersonated {
	var made []*impersonated
	env.ds.client.Config = &rest.Config{Host: "https://downstream.example"}
	env.e.impersonate.newClient = func(cfg *rest.Config) (writeClient, error) {
		user := cfg.Impersonate.UserName
		cs := &fake.Clientset{}
		cs.AddReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
			ra := r.Spec.ResourceAttributes
			where := ra.Namespace
			if where == "" {
				where = ra.Name
			}
			for _, p := range allowed[user] {
				if p == ra.Verb+" "+ra.Resource+" "+where {
					r.Status.Allowed = true
				}
			}
			return true, r, nil
		})
		cs.AddReactor("*", "*", k8stesting.ObjectReaction(down.kube.Tracker()))
		made = append(made, &impersonated{user: user, cs: cs})
		return cs, nil
	}
	return &made
}

// Copies of a HelmOp that names a ServiceAccount are written as that
// ServiceAccount (impersonation), after checking its rights as it; when
// any right is missing nothing of the group is written, by anyone, and the
// row names the ServiceAccount and what it may not do.
func TestWritesAsTheServiceAccount(t *testing.T) {
	const deployer = "system:serviceaccount:cattle-fleet-system:deployer"
	db, settings := srcSecret("db", "7"), srcConfigMap("settings", "9")
	cases := []struct {
		name      string
		existing  []runtime.Object
		sa        string
		allowed   map[string][]string
		wantUser  string
		wantSSAR  []string // the access reviews the user was asked
		wantWrite []string // what the user wrote
		want      copycontract.Status
	}{
		{
			name:      "allowed: both copies written as the ServiceAccount",
			existing:  []runtime.Object{targetNamespace},
			sa:        "cattle-fleet-system/deployer",
			allowed:   map[string][]string{deployer: {"create secrets apps", "create configmaps apps"}},
			wantUser:  deployer,
			wantSSAR:  []string{"create configmaps apps", "create secrets apps"},
			wantWrite: []string{"create configmaps apps/settings", "create secrets apps/db"},
			want:      synced("7", syncedAt),
		},
		{
			name:     "one right missing: nothing written",
			existing: []runtime.Object{targetNamespace},
			sa:       "cattle-fleet-system/deployer",
			allowed:  map[string][]string{deployer: {"create secrets apps"}},
			wantUser: deployer,
			wantSSAR: []string{"create configmaps apps", "create secrets apps"},
			want: copycontract.Status{Phase: courier.CopyPhaseForbidden,
				Message: "cluster c1: forbidden: ServiceAccount cattle-fleet-system/deployer may not create configmaps in namespace apps; nothing was written"},
		},
		{
			name:     "missing namespace it may not create",
			sa:       "cattle-fleet-system/deployer",
			allowed:  map[string][]string{deployer: {"create secrets apps", "create configmaps apps"}},
			wantUser: deployer,
			wantSSAR: []string{"create configmaps apps", "create secrets apps", "create namespaces apps"},
			want: copycontract.Status{Phase: courier.CopyPhaseForbidden,
				Message: "cluster c1: forbidden: ServiceAccount cattle-fleet-system/deployer may not create the missing namespace apps; nothing was written"},
		},
		{
			name:      "no ServiceAccount named: fleet-default when it exists",
			existing:  []runtime.Object{targetNamespace, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-fleet-system", Name: "fleet-default"}}},
			allowed:   map[string][]string{"system:serviceaccount:cattle-fleet-system:fleet-default": {"create secrets apps", "create configmaps apps"}},
			wantUser:  "system:serviceaccount:cattle-fleet-system:fleet-default",
			wantSSAR:  []string{"create configmaps apps", "create secrets apps"},
			wantWrite: []string{"create configmaps apps/settings", "create secrets apps/db"},
			want:      synced("7", syncedAt),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			down := newFakeCluster(true, tc.existing...)
			env := newEnv(t, down, db, settings)
			made := impersonation(env, down, tc.allowed)
			rows := []*courier.DownstreamCopy{rowOf(db), rowOf(settings)}
			for _, r := range rows {
				r.Spec.ServiceAccount = tc.sa
			}

			if err := env.reconcile(rows...); err != nil && tc.want.Phase == courier.CopyPhaseSynced {
				t.Fatalf("reconcile: %v", err)
			}

			if w := writes(down.kube.Actions()); len(w) != 0 {
				t.Errorf("Courier's own identity wrote %q", actionStrings(w))
			}
			if len(*made) != 1 || (*made)[0].user != tc.wantUser {
				var users []string
				for _, m := range *made {
					users = append(users, m.user)
				}
				t.Fatalf("impersonated %q, want only %q", users, tc.wantUser)
			}
			var reviews, wrote []string
			for _, a := range (*made)[0].cs.Actions() {
				if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "selfsubjectaccessreviews" {
					ra := c.GetObject().(*authorizationv1.SelfSubjectAccessReview).Spec.ResourceAttributes
					reviews = append(reviews, strings.TrimSpace(ra.Verb+" "+ra.Resource+" "+ra.Namespace+ra.Name))
					continue
				}
				if s := actionStrings([]k8stesting.Action{a}); len(s) == 1 && a.GetVerb() != "get" {
					wrote = append(wrote, s[0])
				}
			}
			checkActions(t, "access reviews", reviews, tc.wantSSAR)
			checkActions(t, "writes as "+tc.wantUser, wrote, tc.wantWrite)
			checkStatus(t, "Secret row", env.mustStatus(rows[0]), tc.want)
		})
	}
}
