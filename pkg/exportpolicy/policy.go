// Package exportpolicy decides which upstream sources Courier may export
// to downstream clusters at all, whatever an owner lists (docs/design.md#export-safety).
// Courier reads sources with its own identity, so without this rule
// whoever may edit a HelmOp could carry out anything in its namespace that
// Courier can read: a Cluster's kubeconfig (another cluster's admin
// credentials), ServiceAccount tokens, Helm releases, Fleet's own Secrets.
//
// One rule, two callers. The view decides each row's phase with Check
// (from metadata and the Secret's type), and hands denied rows to no
// engine. Every read of a source for copying -- push's GET and the
// agents' payloads -- goes through Guard, which applies the same rule to
// the object read, so that a view that has not caught up yet (an
// annotation added a moment ago) can never let a denied source out.
package exportpolicy

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AnnotationExport on a source set to "false" keeps it from ever being
// exported (docs/design.md#public-names), also with the deny list turned off: it is the
// source's own owner saying so.
const AnnotationExport = "courier.dev/export"

// The rules, as rows and errors name them.
const (
	// RuleKubeconfig: a Secret a Fleet Cluster names as its kubeconfig.
	RuleKubeconfig = "cluster-kubeconfig"
	// RuleSecretType: a Secret of a type that holds credentials or
	// another controller's state.
	RuleSecretType = "secret-type"
	// RuleExportAnnotation: a source annotated courier.dev/export: "false".
	RuleExportAnnotation = "export-annotation"
)

// deniedTypes are the Secret types never exported: credentials minted by
// the cluster for one identity, and Helm's release records (a release's
// whole manifest and values). Fleet's own types are matched by prefix
// (fleetTypePrefix): per-BundleDeployment options, HelmOp access Secrets
// and whatever Fleet adds under its prefix.
var deniedTypes = map[corev1.SecretType]bool{
	corev1.SecretTypeServiceAccountToken: true,
	corev1.SecretTypeBootstrapToken:      true,
	"helm.sh/release.v1":                 true,
}

const fleetTypePrefix = "fleet.cattle.io/"

// DeniedType reports whether Secrets of type t are never exported.
func DeniedType(t corev1.SecretType) bool {
	return deniedTypes[t] || strings.HasPrefix(string(t), fleetTypePrefix)
}

// Source is what the rule looks at of one source: never its data.
type Source struct {
	// Kind is "Secret" or "ConfigMap".
	Kind, Namespace, Name string
	Annotations           map[string]string
	// Type is a Secret's type.
	Type corev1.SecretType
}

// Verdict is the rule's answer for one source: Rule is "" when it may be
// exported; otherwise Rule names the rule that denies it and Message says
// why, naming the source (and the Cluster, for a kubeconfig).
type Verdict struct {
	Rule    string
	Message string
}

// Denied reports whether the source may not be exported.
func (v Verdict) Denied() bool { return v.Rule != "" }

// ClusterIndex answers which Fleet Clusters name a Secret as their
// kubeconfig.
type ClusterIndex interface {
	// KubeconfigOf returns "<namespace>/<name>" of the Clusters whose
	// kubeconfig is read from Secret namespace/name, sorted.
	KubeconfigOf(namespace, name string) []string
}

// Policy is the export rule. Its zero value denies only sources with the
// export annotation; New gives the deny list Courier runs with.
type Policy struct {
	denyList bool
	clusters ClusterIndex
}

// New returns the policy. With denyList false (--deny-sensitive-exports=false)
// only the courier.dev/export annotation denies; clusters may be nil when
// no Cluster is known.
func New(denyList bool, clusters ClusterIndex) *Policy {
	return &Policy{denyList: denyList, clusters: clusters}
}

// DenyList reports whether the deny list is on.
func (p *Policy) DenyList() bool { return p != nil && p.denyList }

// Check returns the verdict for one source. A nil Policy allows
// everything but what the export annotation denies.
func (p *Policy) Check(s Source) Verdict {
	what := fmt.Sprintf("%s %s/%s", s.Kind, s.Namespace, s.Name)
	if p.DenyList() && s.Kind == "Secret" {
		if p.clusters != nil {
			if cs := p.clusters.KubeconfigOf(s.Namespace, s.Name); len(cs) > 0 {
				return Verdict{Rule: RuleKubeconfig, Message: fmt.Sprintf(
					"%s is never exported: it is the kubeconfig of %s %s (rule %s)", what, plural(len(cs), "Cluster"), strings.Join(cs, ", "), RuleKubeconfig)}
			}
		}
		if DeniedType(s.Type) {
			return Verdict{Rule: RuleSecretType, Message: fmt.Sprintf(
				"%s is never exported: Secrets of type %s hold credentials or another controller's state (rule %s)", what, s.Type, RuleSecretType)}
		}
	}
	if strings.EqualFold(s.Annotations[AnnotationExport], "false") {
		return Verdict{Rule: RuleExportAnnotation, Message: fmt.Sprintf(
			"%s is never exported: it is annotated %s: \"false\" (rule %s)", what, AnnotationExport, RuleExportAnnotation)}
	}
	return Verdict{}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// DeniedError is what Guard returns for a denied source. It carries the
// verdict, never the source's data.
type DeniedError struct {
	Verdict Verdict
}

func (e *DeniedError) Error() string { return e.Verdict.Message }

// IsDenied returns the verdict of a DeniedError anywhere in err's chain.
func IsDenied(err error) (Verdict, bool) {
	var d *DeniedError
	if errors.As(err, &d) {
		return d.Verdict, true
	}
	return Verdict{}, false
}

// Guard returns a *DeniedError when obj, a source just read in full for
// copying (a *corev1.Secret or *corev1.ConfigMap), may not be exported,
// and nil otherwise. Every reader of sources for copying calls it before
// handing the object on.
func (p *Policy) Guard(obj runtime.Object) error {
	var s Source
	switch o := obj.(type) {
	case *corev1.Secret:
		s = Source{Kind: "Secret", Namespace: o.Namespace, Name: o.Name, Annotations: o.Annotations, Type: o.Type}
	case *corev1.ConfigMap:
		s = Source{Kind: "ConfigMap", Namespace: o.Namespace, Name: o.Name, Annotations: o.Annotations}
	default:
		return nil
	}
	if v := p.Check(s); v.Denied() {
		return &DeniedError{Verdict: v}
	}
	return nil
}
