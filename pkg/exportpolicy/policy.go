// Package exportpolicy decides which upstream sources Courier may export
// to downstream clusters, or copy into another object, at all, whatever
// an owner lists (docs/design.md#export-safety). Courier reads sources
// with its own identity, so without this rule whoever may edit a HelmOp,
// a Bundle or a field-copy annotation could carry out anything Courier can
// read: a Cluster's kubeconfig (another cluster's admin credentials), any
// kubeconfig with credentials, ServiceAccount tokens, Helm releases,
// Rancher's and Fleet's own Secrets.
//
// One rule, one place, many callers. The view decides each row's phase
// with Check (from metadata, the Secret's type and whether its data holds
// a kubeconfig, SecretFacts), and hands denied rows to no engine. Every
// read of a source for copying -- push's GET, the agents' payloads and
// field copies -- goes through Guard or GuardUnstructured, which apply the
// same rule to the object read, so that a view that has not caught up yet
// (an annotation added a moment ago) can never let a denied source out.
package exportpolicy

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// RuleKubeconfigContent: a Secret any of whose values is a kubeconfig
	// carrying credentials, whether or not a Cluster names it.
	RuleKubeconfigContent = "kubeconfig-content"
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

// rancherTypeDomain is the domain under which Rancher and Fleet name
// their Secret types (fleet.cattle.io/..., management.cattle.io/...,
// provisioning.cattle.io/...): a type whose domain is it or ends in it.
const rancherTypeDomain = "cattle.io"

// DeniedType reports whether Secrets of type t are never exported.
func DeniedType(t corev1.SecretType) bool {
	if deniedTypes[t] {
		return true
	}
	domain, _, ok := strings.Cut(string(t), "/")
	return ok && (domain == rancherTypeDomain || strings.HasSuffix(domain, "."+rancherTypeDomain))
}

// Source is what the rule looks at of one source: never its data.
type Source struct {
	// Kind is "Secret" or "ConfigMap".
	Kind, Namespace, Name string
	Annotations           map[string]string
	// Type is a Secret's type.
	Type corev1.SecretType
	// KubeconfigContent is true for a Secret one of whose values is a
	// kubeconfig carrying credentials (CarriesKubeconfig): the caller
	// that read the data says so, and keeps the data to itself.
	KubeconfigContent bool
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
		if s.KubeconfigContent {
			return Verdict{Rule: RuleKubeconfigContent, Message: fmt.Sprintf(
				"%s is never exported: one of its values is a kubeconfig carrying credentials (rule %s)", what, RuleKubeconfigContent)}
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
		s = Source{Kind: "Secret", Namespace: o.Namespace, Name: o.Name, Annotations: o.Annotations, Type: o.Type,
			KubeconfigContent: p.DenyList() && CarriesKubeconfig(o.Data)}
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

// GuardUnstructured is Guard for an object read through the dynamic
// client (field copies), of any kind: a core/v1 Secret is judged as Guard
// judges it, with its data decoded here only to look for a kubeconfig;
// any other object only by the export annotation.
func (p *Policy) GuardUnstructured(obj *unstructured.Unstructured) error {
	s := Source{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Annotations: obj.GetAnnotations()}
	if obj.GetAPIVersion() == "v1" && obj.GetKind() == "Secret" {
		t, _, _ := unstructured.NestedString(obj.Object, "type")
		s.Type = corev1.SecretType(t)
		s.KubeconfigContent = p.DenyList() && CarriesKubeconfig(unstructuredData(obj))
	}
	if v := p.Check(s); v.Denied() {
		return &DeniedError{Verdict: v}
	}
	return nil
}

// unstructuredData decodes a Secret's data as read through the dynamic
// client (base64 strings). A value that does not decode is skipped: the
// API server never returns one.
func unstructuredData(obj *unstructured.Unstructured) map[string][]byte {
	raw, _, _ := unstructured.NestedMap(obj.Object, "data")
	out := make(map[string][]byte, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			out[k] = b
		}
	}
	return out
}
