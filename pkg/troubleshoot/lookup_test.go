package troubleshoot

import (
	"regexp"
	"strings"
	"testing"
)

// TestLookup: real row messages find the entry that explains them, the
// specific one over the generic one, and nothing outside their phase.
func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		phase, message, fixHas string
	}{
		{"Forbidden", "cluster c3: forbidden: ServiceAccount cattle-fleet-system/app-sa may not create secrets in namespace team-a; nothing was written", "grant the ServiceAccount"},
		{"Forbidden", "cluster c3: forbidden: Courier's own identity may not create secrets in namespace team-a; nothing was written", "artifacts/downstream/rbac.yaml"},
		{"Conflict", "Secret team-a/creds exists in cluster c1 and is not managed by Courier; it is left unchanged", "remove or rename that object"},
		{"Conflict", `Secret team-a/creds exists in cluster c1 and belongs to another owner (HelmOp "ns/other"); it is left unchanged`, "another destination namespace"},
		{"Unreachable", "cluster c2 is unreachable: creating Secret a/b as ServiceAccount x/y: Unauthorized", "renew the credentials"},
		{"Unreachable", "cluster c2 is unreachable: dial tcp 127.0.0.1:1: connect: connection refused", "server address"},
		{"SourceMissing", "Secret fleet-default/creds does not exist", "create it there"},
		{"Pending", "Secret fleet-default/creds is not copied to cluster c1 yet", "wait"},
		{"Denied", `Secret ns/creds is never exported: it is annotated courier.dev/export: "false" (rule export-annotation); nothing is written`, "remove the annotation"},
	} {
		p, e := Lookup(tc.phase, tc.message)
		if p == nil || p.Phase != tc.phase || e == nil || !strings.Contains(e.Fix, tc.fixHas) {
			t.Errorf("Lookup(%s, %q) = %v, %+v; want a fix with %q", tc.phase, tc.message, p, e, tc.fixHas)
		}
	}
	if _, e := Lookup("Conflict", "Secret fleet-default/creds does not exist"); e != nil {
		t.Errorf("a SourceMissing message matched a Conflict entry: %+v", e)
	}
	if p, _ := Lookup("Nonsense", "x"); p != nil {
		t.Errorf("an unknown phase found %+v", p)
	}
}

func TestPlain(t *testing.T) {
	got := Plain("see [rbac.md](rbac.md#the-helmops-serviceaccount) and [x](https://e.org)")
	if want := "see docs/rbac.md#the-helmops-serviceaccount and x (https://e.org)"; got != want {
		t.Errorf("Plain = %q, want %q", got, want)
	}
}

// TestMatchesCompile: every explicit Match is a valid regular expression
// (Lookup would panic on one that is not).
func TestMatchesCompile(t *testing.T) {
	for _, p := range Phases() {
		for _, e := range p.Entries {
			if e.Match == "" {
				continue
			}
			if _, err := regexp.Compile(e.Match); err != nil {
				t.Errorf("%s: Match %q: %v", p.Phase, e.Match, err)
			}
		}
	}
}
