// Package targeting decides which downstream Clusters a Fleet HelmOp or
// Bundle targets and with which options, so that Courier copies their
// downstreamResources exactly where Fleet would deploy them (Bundles:
// ResolveBundle, with Fleet's targetRestrictions and targetCustomizations).
//
// Courier does not import Fleet: this package reimplements Fleet's target
// semantics (docs/design.md#targeting) as pure functions over Courier's
// Fleet-compatible types. Targets are evaluated in order and the first one
// that matches a Cluster wins; a HelmOp without targets gets the implicit
// target {clusterGroup: default}; a matching target with doNotDeploy excludes
// the Cluster. Unlike Fleet, a target whose selector is invalid does not abort
// the others: it matches nothing and is reported as a Problem.
package targeting

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// DefaultTargetName names the implicit target of a HelmOp that has none.
const DefaultTargetName = "default"

// DefaultClusterGroup is the ClusterGroup the implicit target selects.
const DefaultClusterGroup = "default"

// DefaultNamespace is the destination namespace when neither namespace nor
// defaultNamespace is set.
const DefaultNamespace = "default"

// ErrNoCriteria is the Err of a Problem about a target that sets none of
// clusterName, clusterSelector, clusterGroup and clusterGroupSelector.
var ErrNoCriteria = errors.New("sets none of clusterName, clusterSelector, clusterGroup, clusterGroupSelector, so it matches no cluster")

// Options are a HelmOp's root options merged with those of the target that
// matched a cluster.
type Options struct {
	// Resources is root ∪ target, deduplicated on ResourceKey, root order
	// first, first spelling kept. Entries with an empty kind or name are kept.
	Resources []v1alpha1.DownstreamResource
	// Namespace is the destination namespace: namespace, else
	// defaultNamespace, else "default" (each field's target value overriding
	// the root's).
	Namespace string
	// ServiceAccount is the target's value when non-empty, else the root's.
	ServiceAccount string
	// KeepResources is the OR of root and target.
	KeepResources bool
}

// Match is a Cluster the HelmOp deploys to, with the target that won it.
type Match struct {
	// Cluster is the caller's object (not a copy); do not modify it.
	Cluster *v1alpha1.Cluster
	// TargetName is the target's name, "target%03d" (its index) when
	// unnamed, as Fleet names them, or "default" for the implicit target.
	TargetName string
	Options    Options
}

// Problem explains why a target can match no cluster, or why a ClusterGroup
// that a target consults can never contain one.
type Problem struct {
	Target string // as in Match.TargetName
	Group  string // set when the problem is the ClusterGroup's own selector
	Field  string // "clusterSelector", "clusterGroupSelector", "spec.selector", or "" for ErrNoCriteria
	Err    error
}

func (p Problem) Error() string {
	switch {
	case p.Group != "":
		return fmt.Sprintf("target %q: ClusterGroup %q: invalid %s: %v", p.Target, p.Group, p.Field, p.Err)
	case p.Field != "":
		return fmt.Sprintf("target %q: invalid %s: %v", p.Target, p.Field, p.Err)
	default:
		return fmt.Sprintf("target %q: %v", p.Target, p.Err)
	}
}

func (p Problem) Unwrap() error { return p.Err }

// ResourceKey is the identity of a downstream resource: lower(kind)+"/"+name.
func ResourceKey(r v1alpha1.DownstreamResource) string {
	return strings.ToLower(r.Kind) + "/" + r.Name
}

// MergeOptions merges a HelmOp's root options with a target's (which may be
// nil, for the root options alone).
func MergeOptions(root v1alpha1.BundleDeploymentOptions, target *v1alpha1.BundleTarget) Options {
	if target == nil {
		return finish(mergeRaw(root, v1alpha1.BundleDeploymentOptions{}))
	}
	return finish(mergeRaw(root, target.BundleDeploymentOptions))
}

// mergeRaw is Fleet's options.Merge for the fields Courier reads: custom's
// non-empty namespace, defaultNamespace and serviceAccount override base's,
// keepResources is OR-ed, and downstreamResources are base ∪ custom,
// deduplicated on ResourceKey, base order first, first spelling kept.
func mergeRaw(base, custom v1alpha1.BundleDeploymentOptions) v1alpha1.BundleDeploymentOptions {
	merged := base
	if custom.TargetNamespace != "" {
		merged.TargetNamespace = custom.TargetNamespace
	}
	if custom.DefaultNamespace != "" {
		merged.DefaultNamespace = custom.DefaultNamespace
	}
	if custom.ServiceAccount != "" {
		merged.ServiceAccount = custom.ServiceAccount
	}
	merged.KeepResources = merged.KeepResources || custom.KeepResources
	merged.DownstreamResources = nil
	seen := map[string]bool{}
	for _, list := range [][]v1alpha1.DownstreamResource{base.DownstreamResources, custom.DownstreamResources} {
		for _, r := range list {
			if k := ResourceKey(r); !seen[k] {
				seen[k] = true
				merged.DownstreamResources = append(merged.DownstreamResources, r)
			}
		}
	}
	return merged
}

// finish turns merged options into what a copy needs: the destination
// namespace is namespace, else defaultNamespace, else "default".
func finish(merged v1alpha1.BundleDeploymentOptions) Options {
	ns := merged.TargetNamespace
	if ns == "" {
		ns = merged.DefaultNamespace
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	return Options{
		Resources:      merged.DownstreamResources,
		Namespace:      ns,
		ServiceAccount: merged.ServiceAccount,
		KeepResources:  merged.KeepResources,
	}
}

// group is a ClusterGroup of the HelmOp's namespace; sel nil matches nothing.
type group struct {
	name   string
	labels labels.Set
	sel    labels.Selector
	err    error
}

// target is a BundleTarget with its selectors parsed; a nil selector is unset.
type target struct {
	name       string
	spec       *v1alpha1.BundleTarget
	clusterSel labels.Selector
	groupSel   labels.Selector
	never      bool // invalid selector or no criteria: matches nothing
}

// Resolve returns, for every Cluster in the HelmOp's namespace, the first
// target that matches it (Fleet order), except Clusters whose first match
// has doNotDeploy, sorted by cluster name. Clusters and ClusterGroups from
// other namespaces are ignored. Problems lists targets that can match
// nothing because of an invalid selector or no criteria, and ClusterGroups
// with an invalid selector that a target consults, in target order; they
// never stop the other targets from matching.
func Resolve(op *v1alpha1.HelmOp, clusters []*v1alpha1.Cluster, groups []*v1alpha1.ClusterGroup) ([]Match, []Problem) {
	if op == nil {
		return nil, nil
	}
	gs := namespaceGroups(op.Namespace, groups)
	ts, problems := parseTargets(op, gs)
	var matches []Match
	for _, c := range clusters {
		if c == nil || c.Namespace != op.Namespace {
			continue
		}
		for i := range ts {
			t := &ts[i]
			if !t.matches(c, gs) {
				continue
			}
			if !t.spec.DoNotDeploy {
				matches = append(matches, Match{
					Cluster:    c,
					TargetName: t.name,
					Options:    MergeOptions(op.Spec.BundleDeploymentOptions, t.spec),
				})
			}
			break
		}
	}
	sort.SliceStable(matches, func(i, j int) bool { return matches[i].Cluster.Name < matches[j].Cluster.Name })
	return matches, problems
}

// namespaceGroups are the ClusterGroups of namespace, their selectors
// parsed, sorted by name: a target may only consult its HelmOp's own.
func namespaceGroups(namespace string, groups []*v1alpha1.ClusterGroup) []group {
	var gs []group
	for _, g := range groups {
		if g == nil || g.Namespace != namespace {
			continue
		}
		gr := group{name: g.Name, labels: labels.Set(g.Labels)}
		if g.Spec.Selector != nil {
			gr.sel, gr.err = metav1.LabelSelectorAsSelector(g.Spec.Selector)
		}
		gs = append(gs, gr)
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	return gs
}

// parseTargets parses the HelmOp's targets in order (the implicit
// {clusterGroup: default} when it has none) and lists their problems: a
// target's invalid selectors or missing criteria, then each invalid
// ClusterGroup selector it is the first to consult.
func parseTargets(op *v1alpha1.HelmOp, gs []group) ([]target, []Problem) {
	specs := op.Spec.Targets
	if len(specs) == 0 {
		specs = []v1alpha1.BundleTarget{{Name: DefaultTargetName, ClusterGroup: DefaultClusterGroup}}
	}
	return parseTargetList(specs, gs)
}

// parseTargetList parses specs in order, as parseTargets does.
func parseTargetList(specs []v1alpha1.BundleTarget, gs []group) ([]target, []Problem) {
	var problems []Problem
	reported := map[string]bool{}
	ts := make([]target, 0, len(specs))
	for i := range specs {
		t, tp := parseTarget(i, &specs[i])
		problems = append(problems, tp...)
		if !t.never && (t.spec.ClusterGroup != "" || t.groupSel != nil) {
			for _, g := range gs {
				if g.err != nil && !reported[g.name] && t.consults(g) {
					reported[g.name] = true
					problems = append(problems, Problem{Target: t.name, Group: g.name, Field: "spec.selector", Err: g.err})
				}
			}
		}
		ts = append(ts, t)
	}
	return ts, problems
}

// parseTarget parses the i-th target's selectors. A target with an
// invalid selector or no criteria at all matches nothing, and says why.
func parseTarget(i int, spec *v1alpha1.BundleTarget) (target, []Problem) {
	var problems []Problem
	t := target{name: spec.Name, spec: spec}
	if t.name == "" {
		t.name = fmt.Sprintf("target%03d", i)
	}
	parse := func(field string, s *metav1.LabelSelector) labels.Selector {
		if s == nil {
			return nil
		}
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			problems = append(problems, Problem{Target: t.name, Field: field, Err: err})
			t.never = true
		}
		return sel
	}
	t.clusterSel = parse("clusterSelector", spec.ClusterSelector)
	t.groupSel = parse("clusterGroupSelector", spec.ClusterGroupSelector)
	if spec.ClusterName == "" && spec.ClusterSelector == nil && spec.ClusterGroup == "" && spec.ClusterGroupSelector == nil {
		problems = append(problems, Problem{Target: t.name, Err: ErrNoCriteria})
		t.never = true
	}
	return t, problems
}

// consults reports whether g passes the target's group criteria, i.e.
// whether g's selector decides if the target matches a cluster.
func (t *target) consults(g group) bool {
	if t.spec.ClusterGroup != "" && g.name != t.spec.ClusterGroup {
		return false
	}
	return t.groupSel == nil || t.groupSel.Matches(g.labels)
}

// ClusterDisplayNameLabel is the label Rancher puts on a Cluster with its
// display name; Fleet's clusterName matches it as well as the name.
const ClusterDisplayNameLabel = "management.cattle.io/cluster-display-name"

// matches reports whether every criterion the target sets holds for c, in
// one of the groups that contain c (or in none, when the target sets no
// group criteria).
func (t *target) matches(c *v1alpha1.Cluster, gs []group) bool {
	return t.matchesAny(c, containing(c, gs), nil)
}

// matchesAny reports whether t and, when restrictions are given, one of
// them hold for c in the same group: Fleet evaluates a target and the
// restrictions group by group (matcher/bundlematch.go), or with no group
// when c is in none.
func (t *target) matchesAny(c *v1alpha1.Cluster, in []*group, restrictions []target) bool {
	if t.never {
		return false
	}
	check := func(g *group) bool {
		if !t.matchesIn(c, g) {
			return false
		}
		if restrictions == nil {
			return true
		}
		for i := range restrictions {
			if restrictions[i].matchesIn(c, g) {
				return true
			}
		}
		return false
	}
	if len(in) == 0 {
		return check(nil)
	}
	for _, g := range in {
		if check(g) {
			return true
		}
	}
	return false
}

// matchesIn reports whether every criterion the target sets holds for c
// as a member of g (nil: of no group).
func (t *target) matchesIn(c *v1alpha1.Cluster, g *group) bool {
	if t.never {
		return false
	}
	if n := t.spec.ClusterName; n != "" && n != c.Name && n != c.Labels[ClusterDisplayNameLabel] {
		return false
	}
	if t.clusterSel != nil && !t.clusterSel.Matches(labels.Set(c.Labels)) {
		return false
	}
	if t.spec.ClusterGroup == "" && t.groupSel == nil {
		return true
	}
	return g != nil && t.consults(*g)
}

// containing are the groups whose valid selector selects c.
func containing(c *v1alpha1.Cluster, gs []group) []*group {
	var in []*group
	cl := labels.Set(c.Labels)
	for i := range gs {
		if g := &gs[i]; g.sel != nil && g.err == nil && g.sel.Matches(cl) {
			in = append(in, g)
		}
	}
	return in
}
