package targeting

import (
	"fmt"
	"sort"

	"github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// ResolveBundle returns, for every Cluster in the Bundle's namespace that
// Fleet would deploy the Bundle to, the target that won it and the merged
// options, sorted by cluster name. It follows Fleet's Bundle targeting
// (rancher/fleet internal/cmd/controller/target: builder.go and
// matcher/bundlematch.go):
//
//   - A Bundle without targetRestrictions (made by `fleet apply` alone):
//     every target is a plain target, and the first that matches wins, as
//     for a HelmOp, except that a Bundle without targets targets nothing
//     (Fleet adds the implicit default target to the GitRepo or HelmOp,
//     never to the Bundle).
//   - With targetRestrictions (a GitRepo's Bundle): the last
//     len(targetRestrictions) targets are the GitRepo's targets and the
//     ones before them the fleet.yaml targetCustomizations. The first
//     GitRepo target that matches the Cluster, in a group where one of the
//     restrictions matches too, wins. Then the customizations: with
//     FirstMatch (the default) the first matching one replaces the winning
//     target's options; with AllMatches every matching one is merged into
//     them in order. A doNotDeploy on the winning target or on an applied
//     customization excludes the Cluster.
//   - The result is merged into the Bundle's root options (mergeRaw).
//
// Invalid selectors make a target or restriction match nothing and are
// reported as Problems; they never stop the others.
func ResolveBundle(b *v1alpha1.Bundle, clusters []*v1alpha1.Cluster, groups []*v1alpha1.ClusterGroup) ([]Match, []Problem) {
	if b == nil {
		return nil, nil
	}
	gs := namespaceGroups(b.Namespace, groups)
	ts, problems := parseTargetList(b.Spec.Targets, gs)
	rs, rp := parseRestrictions(b.Spec.TargetRestrictions)
	problems = append(problems, rp...)
	custom, plain := splitCustomizations(ts, len(rs))
	var restrictions []target // nil: none to pass
	if len(rs) > 0 {
		restrictions = rs
	}
	var matches []Match
	for _, c := range clusters {
		if c == nil || c.Namespace != b.Namespace {
			continue
		}
		in := containing(c, gs)
		var won *target
		for i := range plain {
			if plain[i].matchesAny(c, in, restrictions) {
				won = &plain[i]
				break
			}
		}
		if won == nil || won.spec.DoNotDeploy {
			continue
		}
		opts, ok := customize(won.spec.BundleDeploymentOptions, custom, c, in, b.Spec.TargetCustomizationMode)
		if !ok {
			continue
		}
		matches = append(matches, Match{Cluster: c, TargetName: won.name, Options: finish(mergeRaw(b.Spec.BundleDeploymentOptions, opts))})
	}
	sort.SliceStable(matches, func(i, j int) bool { return matches[i].Cluster.Name < matches[j].Cluster.Name })
	return matches, problems
}

// splitCustomizations splits a Bundle's parsed targets into the fleet.yaml
// targetCustomizations and the plain (GitRepo) targets: with n
// restrictions, the last n targets are plain; with none, all are.
func splitCustomizations(ts []target, restrictions int) (custom, plain []target) {
	if restrictions == 0 || restrictions >= len(ts) {
		return nil, ts
	}
	n := len(ts) - restrictions
	return ts[:n], ts[n:]
}

// customize applies the customizations that match c to the winning
// target's options (mode FirstMatch or AllMatches); ok is false when one
// it applies says doNotDeploy.
func customize(opts v1alpha1.BundleDeploymentOptions, custom []target, c *v1alpha1.Cluster, in []*group, mode string) (v1alpha1.BundleDeploymentOptions, bool) {
	for i := range custom {
		cu := &custom[i]
		if !cu.matchesAny(c, in, nil) {
			continue
		}
		if cu.spec.DoNotDeploy {
			return opts, false
		}
		if mode != v1alpha1.TargetCustomizationModeAllMatches {
			return cu.spec.BundleDeploymentOptions, true
		}
		opts = mergeRaw(opts, cu.spec.BundleDeploymentOptions)
	}
	return opts, true
}

// parseRestrictions parses a Bundle's targetRestrictions like targets: one
// with an invalid selector or no criteria matches nothing, and says why.
func parseRestrictions(specs []v1alpha1.BundleTargetRestriction) ([]target, []Problem) {
	var rs []target
	var problems []Problem
	for i, r := range specs {
		spec := &v1alpha1.BundleTarget{
			Name: r.Name, ClusterName: r.ClusterName, ClusterSelector: r.ClusterSelector,
			ClusterGroup: r.ClusterGroup, ClusterGroupSelector: r.ClusterGroupSelector,
		}
		t, tp := parseTarget(i, spec)
		t.name = fmt.Sprintf("restriction%03d", i)
		if r.Name != "" {
			t.name = "restriction " + r.Name
		}
		for j := range tp {
			tp[j].Target = t.name
		}
		problems = append(problems, tp...)
		rs = append(rs, t)
	}
	return rs, problems
}
