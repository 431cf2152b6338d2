package importrules

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/courier-dev/courier"

// rule forbids packages among the dependencies of one package.
type rule struct {
	pkg string
	// forbidden are import paths relative to the module; one ending in
	// "/..." forbids that package and every package under it.
	forbidden []string
	// thirdParty are whole import paths outside the module, read the same
	// way.
	thirdParty []string
}

// rules are the edges docs/design.md ("Data flows one way") rules out.
var rules = []rule{
	// The agent runs the engine in a downstream cluster: nothing of the
	// server's view, registry, API server or authorizer.
	// Nor any API server library or etcd client, which a downstream cluster
	// has no use for: the agent is a client of two clusters.
	{pkg: "cmd/agent", forbidden: []string{"pkg/copyview", "pkg/registry/...", "pkg/memstore", "pkg/apiserver", "pkg/agentauth"},
		thirdParty: []string{"k8s.io/apiserver/...", "go.etcd.io/..."}},
	// The engine is fed by the view through copycontract; it does not
	// import it, nor the store the view writes.
	{pkg: "pkg/engine", forbidden: []string{"pkg/copyview", "pkg/registry/...", "pkg/memstore"}},
	// Sharding decides who delivers; the engine will ask it, never the
	// other way round, and it knows nothing of rows or their store.
	{pkg: "pkg/sharding", forbidden: []string{"pkg/engine", "pkg/copyview", "pkg/registry/...", "pkg/memstore"}},
	// The REST storage takes a row's status rules from pkg/rowstatus, as
	// the view does; it never imports the view, which sits above it.
	{pkg: "pkg/registry/...", forbidden: []string{"pkg/copyview"}},
}

// leaves are packages that may import only the standard library and the
// import paths listed with them: the contract between the view and the
// engine, and a row's status rules, which the view and the REST storage
// share.
var leaves = map[string][]string{
	"pkg/copycontract": {module + "/pkg/apis/...", "k8s.io/apimachinery/..."},
	"pkg/rowstatus":    {module + "/pkg/apis/...", module + "/pkg/copycontract", "k8s.io/apimachinery/..."},
}

func TestLeaves(t *testing.T) {
	for pkg, allowed := range leaves {
		t.Run(pkg, func(t *testing.T) {
			imports := goList(t, "", `{{join .Imports "\n"}}`, module+"/"+pkg)
			std := map[string]bool{}
			for _, p := range goList(t, "", "{{if .Standard}}{{.ImportPath}}{{end}}", imports...) {
				std[p] = true
			}
			for _, p := range imports {
				if !std[p] && !matchesAny(p, allowed) {
					t.Errorf("%s imports %s; it may import only the standard library, %s", pkg, p, strings.Join(allowed, ", "))
				}
			}
		})
	}
}

func TestImportRules(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			deps := goList(t, "-deps", "{{.ImportPath}}", module+"/"+r.pkg)
			for _, bad := range violations(deps, r.patterns()) {
				t.Errorf("%s depends on %s, which it must not (pkg/importrules)", r.pkg, bad)
			}
		})
	}
}

// patterns returns the rule's forbidden patterns as whole import paths.
func (r rule) patterns() []string {
	abs := make([]string, 0, len(r.forbidden)+len(r.thirdParty))
	for _, f := range r.forbidden {
		abs = append(abs, module+"/"+f)
	}
	return append(abs, r.thirdParty...)
}

// violations returns the dependencies (import paths) that a forbidden
// pattern (a whole import path) matches.
func violations(deps, patterns []string) []string {
	var out []string
	for _, d := range deps {
		if matchesAny(d, patterns) {
			out = append(out, d)
		}
	}
	return out
}

// matchesAny reports whether path is one of patterns, or under one that
// ends in "/...".
func matchesAny(path string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, tree := strings.CutSuffix(p, "/..."); tree {
			if path == prefix || strings.HasPrefix(path, prefix+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// goList runs `go list [flag] -f format pkgs...` (flag is "-deps" or
// empty) and returns its non-empty lines. A missing go command fails the
// test: the rules are never skipped.
func goList(t *testing.T, flag, format string, pkgs ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the import rules need the go command on PATH: %v", err)
	}
	args := []string{"list", "-f", format}
	if flag != "" {
		args = append(args, flag)
	}
	out, err := exec.Command(gobin, append(args, pkgs...)...).Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", pkgs, err, stderr)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestViolations(t *testing.T) {
	deps := []string{
		"fmt",
		module + "/pkg/copycontract",
		module + "/pkg/copyview",
		module + "/pkg/copyviewer",
		module + "/pkg/registry",
		module + "/pkg/registry/memstore",
		module + "/pkg/registryx",
		"go.etcd.io/etcd/client/v3",
		"k8s.io/apiserver/pkg/server",
		"k8s.io/apiserverx",
	}
	for _, tc := range []struct {
		name string
		rule rule
		want []string
	}{
		{name: "none", rule: rule{}, want: nil},
		{name: "exact path, not a prefix", rule: rule{forbidden: []string{"pkg/copyview"}}, want: []string{module + "/pkg/copyview"}},
		{name: "a tree and its root", rule: rule{forbidden: []string{"pkg/registry/..."}},
			want: []string{module + "/pkg/registry", module + "/pkg/registry/memstore"}},
		{name: "not present", rule: rule{forbidden: []string{"pkg/agentauth"}}, want: nil},
		{name: "third-party trees", rule: rule{thirdParty: []string{"k8s.io/apiserver/...", "go.etcd.io/..."}},
			want: []string{"go.etcd.io/etcd/client/v3", "k8s.io/apiserver/pkg/server"}},
		{name: "both kinds", rule: rule{forbidden: []string{"pkg/copyview"}, thirdParty: []string{"k8s.io/apiserver/..."}},
			want: []string{module + "/pkg/copyview", "k8s.io/apiserver/pkg/server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(deps, tc.rule.patterns())
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("violations = %v, want %v", got, tc.want)
			}
		})
	}
}
