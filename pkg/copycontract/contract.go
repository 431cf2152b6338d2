// Package copycontract is the contract between whoever decides which copies
// exist (the view on the management side, the courier-agent in a pulled
// cluster) and the copy engine that makes them: the rule that says whether
// a row's copy can be written at all (Copyable), the status the engine
// records for a row (Status), the copies it finds that no row wants any
// more (Leftover), and what it tells when its record changes
// (StatusChange).
//
// It is a leaf: it imports only the API types and apimachinery, so that
// the engine and the agent depend on it and not on the server's view, its
// store or its registry (pkg/importrules checks this).
package copycontract

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// Status is what the copy engine recorded for one row: the outcome of its
// last pass over the row's copy. The view composes a row's displayed
// status from it; a courier-agent reports it upstream.
type Status struct {
	Phase                 courier.CopyPhase
	Message               string
	SyncedResourceVersion string
	LastSyncTime          *metav1.Time
}

// StatusChange is what changed in the engine's record for one HelmOp, as
// the engine tells whoever listens (the view, an agent's reporter).
type StatusChange struct {
	HelmOp types.NamespacedName
	// Rows are the keys ("<namespace>/<name>") of the HelmOp's rows whose
	// recorded status changed.
	Rows []string
	// Leftovers is true when the HelmOp's leftover copies (Kept, Deleting)
	// changed in some cluster.
	Leftovers bool
}

// Leftover is a copy Courier made that no row wants any more, as the
// engine found it downstream. The view shows it as a row of phase Kept or
// Deleting.
type Leftover struct {
	HelmOp          types.NamespacedName
	Cluster         string
	Kind            string
	Name            string
	TargetNamespace string
	Keep            bool
	// SyncedResourceVersion is the source version the copy was made from.
	SyncedResourceVersion string
	Phase                 courier.CopyPhase // Kept or Deleting
	Message               string
}

// SupportedKind returns the canonical kind for a listed kind, matched case
// insensitively (docs/design.md#kinds-and-sources), and false for any other kind.
func SupportedKind(kind string) (string, bool) {
	switch strings.ToLower(kind) {
	case "secret":
		return "Secret", true
	case "configmap":
		return "ConfigMap", true
	}
	return "", false
}

// Invalid returns why no copy can ever be written for a row with this
// spec, whatever exists upstream: an unsupported kind, no name, or a
// destination namespace no namespace can be named. It returns "" for a
// spec that is copyable once its source exists. The view shows the
// reason as the row's Invalid message; the payload endpoint refuses with
// it.
func Invalid(spec courier.DownstreamCopySpec) string {
	src := spec.Source
	kind, ok := SupportedKind(src.Kind)
	switch {
	case !ok:
		return fmt.Sprintf("kind %q cannot be copied: only Secret and ConfigMap are supported", src.Kind)
	case src.Name == "":
		return fmt.Sprintf("%s entry has no name", kind)
	}
	if !isDNSLabel(spec.Target.Namespace) {
		errs := validation.IsDNS1123Label(spec.Target.Namespace)
		return fmt.Sprintf("destination namespace %q cannot exist: %s", spec.Target.Namespace, strings.Join(errs, "; "))
	}
	return ""
}

// isDNSLabel says what validation.IsDNS1123Label says, without its regular
// expression: that match was most of the cost of a row's base status,
// which every replica computes for each row of a changed source (1.8 % of
// a replica's CPU in a change of every source at N=1,000). The validation
// package still words the message.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123LabelMaxLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// SourceMissing reports whether a valid spec names a source that does not
// exist: the view found no object of that name, so the spec carries no
// source resourceVersion.
func SourceMissing(spec courier.DownstreamCopySpec) bool {
	return Invalid(spec) == "" && spec.Source.ResourceVersion == ""
}

// Copyable reports whether a copy can be written for a row with this spec:
// its kind is supported, it names its source, the source exists (an object
// read from the API always has a resourceVersion; a missing source has none
// in the row) and its destination namespace can exist. The view derives a
// row's base phase from the same spec by the same rule, and the engine, the
// agent and the payload endpoint decide from it, so nobody decides what to
// copy from a displayed status.
func Copyable(spec courier.DownstreamCopySpec) bool {
	return Invalid(spec) == "" && spec.Source.ResourceVersion != ""
}

// SplitKey splits the keys the contract names rows and Clusters by,
// "<namespace>/<name>" (StatusChange.Rows, the engine's Cluster keys).
func SplitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}

// OwnerKey is the key a row's copies are filed under, by the engine and in
// the owner label of every copy (copyspec.OwnerHash): the namespace and
// name of a HelmOp, or for a Bundle its name prefixed with "bundle:" (no
// HelmOp's name holds a ":", so a HelmOp and a Bundle of the same name
// never share copies). A row from a server that did not set spec.owner
// names its HelmOp only.
func OwnerKey(namespace string, spec courier.DownstreamCopySpec) types.NamespacedName {
	if spec.Owner.Kind == courier.OwnerKindBundle {
		return types.NamespacedName{Namespace: namespace, Name: courier.BundleSummaryPrefix + spec.Owner.Name}
	}
	if spec.Owner.Name != "" {
		return types.NamespacedName{Namespace: namespace, Name: spec.Owner.Name}
	}
	return types.NamespacedName{Namespace: namespace, Name: spec.HelmOp}
}

// OwnerOf is the owner an OwnerKey names.
func OwnerOf(key types.NamespacedName) courier.CopyOwner {
	if name, ok := strings.CutPrefix(key.Name, courier.BundleSummaryPrefix); ok {
		return courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: name}
	}
	return courier.CopyOwner{Kind: courier.OwnerKindHelmOp, Name: key.Name}
}
