// Package copyspec decides what a downstream copy of an upstream Secret or
// ConfigMap looks like, and whether an object found downstream is Courier's
// to overwrite or delete (docs/design.md#public-names, docs/design.md#rules-of-behaviour).
//
// Everything here is a pure function of its arguments: no clients, no
// caches. The copy engine builds the wanted object with Secret or ConfigMap,
// checks the existing object with OwnershipOf and FleetCopy, keeps the
// writer a twin Cluster's copy names with AdoptWriter, and then uses
// UpToDate and NeedsRecreate to pick between doing nothing, an update (at
// the existing object's resourceVersion), and delete-then-create. The
// selectors (ClusterSelector, UnlabelledSelector, FleetCopySelector) are
// what the downstream informers watch.
package copyspec

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// Labels and annotations Courier puts on every copy. They are public names
// (docs/design.md#public-names): changing them orphans every copy already written.
const (
	// LabelManagedBy marks every copy.
	LabelManagedBy = "courier.dev/managed-by"
	ManagedByValue = "courier"
	// LabelOwner holds OwnerHash of the upstream and HelmOp that wrote the copy.
	LabelOwner = "courier.dev/owner"
	// AnnotationHelmOp is "<namespace>/<name>" of the HelmOp.
	AnnotationHelmOp = "courier.dev/helmop"
	// AnnotationBundle is "<namespace>/<name>" of the Bundle, on the copies
	// of a Bundle's list (instead of AnnotationHelmOp).
	AnnotationBundle = "courier.dev/bundle"
	// AnnotationUpstream is the id of the upstream cluster.
	AnnotationUpstream = "courier.dev/upstream"
	// AnnotationSourceResourceVersion is the source's resourceVersion the
	// copy was made from (the view's syncedResourceVersion).
	AnnotationSourceResourceVersion = "courier.dev/source-resource-version"
	// AnnotationKeep is "true" on a copy written under keepResources: removal
	// sweeps leave it alone, even after the HelmOp is gone. Absent otherwise.
	AnnotationKeep = "courier.dev/keep-resources"
	// LegacyAnnotationCluster named the Fleet Cluster (in the HelmOp's
	// namespace) a copy was written for, before LabelClusterHash did the
	// same job. It is no longer written: every write of a copy paid for
	// the extra key in the kube-apiserver (validation, managed fields,
	// encoding; docs/benchmarks.md). It is still read on copies that have
	// no LabelClusterHash yet, ignored when comparing a copy with what it
	// should be (so an upgrade rewrites nothing), and gone after the
	// copy's next write.
	LegacyAnnotationCluster = "courier.dev/cluster"
	// LabelClusterHash is ClusterHash of the Fleet Cluster the copy was
	// written for (docs/design.md#public-names), so that each Cluster's downstream watch
	// selects only its own copies (ClusterSelector): with a thousand Clusters
	// on one kube-apiserver, every copy would otherwise be delivered to,
	// decoded by and cached for every one of them.
	LabelClusterHash = "courier.dev/cluster-hash"
	// FleetCopyLabel marks the copies Fleet's own agent makes of
	// downstreamResources (its value is the BundleDeployment's name).
	// Courier never writes or deletes such an object (docs/design.md#fleets-own-copies).
	FleetCopyLabel = "fleet.cattle.io/bundledeployment"

	// courierPrefix is reserved: keys with it are never taken from a source.
	courierPrefix = "courier.dev/"
	// lastApplied is kubectl's record of the source's own apply; downstream
	// it would make kubectl apply compute diffs against the wrong object.
	lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
)

// Owner identifies who a copy belongs to.
type Owner struct {
	UpstreamID string
	HelmOp     types.NamespacedName
	// Cluster is the name of the Fleet Cluster the copy is written for.
	Cluster string
	// Keep is the effective keepResources of the target that wrote the copy.
	Keep bool
}

// OwnerHash is the value of LabelOwner for a copy made for helmOp on the
// upstream cluster upstreamID: the first 40 hex characters of sha256 over
// "upstream\x00namespace\x00name". A hash, because "<ns>/<name>" plus an
// upstream id is neither a valid label value nor bounded to 63 characters;
// the NUL separators keep ("a","bc") and ("ab","c") apart.
func OwnerHash(upstreamID string, helmOp types.NamespacedName) string {
	return hashes.of(upstreamID, helmOp.Namespace, helmOp.Name)
}

// ClusterHash is the value of LabelClusterHash for copies written for the
// Fleet Cluster namespace/name by the upstream upstreamID: the first 40 hex
// characters of sha256 over "upstream\x00namespace\x00name".
func ClusterHash(upstreamID, namespace, name string) string {
	return hashes.of(upstreamID, namespace, name)
}

// hashes remembers the label hashes computed last. Every pass over a
// Cluster judges each of its copies' ownership, and its sweep each copy's
// claim: at 1,000 Clusters x 10 copies that was a sha256 per copy per pass
// for a handful of distinct HelmOps and Clusters. Bounded, because a claim
// is read from a copy's annotations, which anyone who can edit the copy
// can fill with new values.
var hashes = &hashCache{byInput: map[string]string{}}

type hashCache struct {
	mu      sync.Mutex
	byInput map[string]string
}

// hashCacheSize bounds hashCache: when full it starts over.
const hashCacheSize = 8192

// of is the first 40 hex characters of sha256 over a, b and c joined by
// NUL bytes.
func (h *hashCache) of(a, b, c string) string {
	in := a + "\x00" + b + "\x00" + c
	h.mu.Lock()
	out, ok := h.byInput[in]
	h.mu.Unlock()
	if ok {
		return out
	}
	sum := sha256.Sum256([]byte(in))
	out = hex.EncodeToString(sum[:])[:40]
	h.mu.Lock()
	if len(h.byInput) >= hashCacheSize {
		clear(h.byInput)
	}
	h.byInput[in] = out
	h.mu.Unlock()
	return out
}

// ClusterSelector selects the copies written for one Fleet Cluster: what
// that Cluster's downstream informers watch.
func ClusterSelector(upstreamID, namespace, name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelClusterHash: ClusterHash(upstreamID, namespace, name)})
}

// UnlabelledSelector selects Courier's copies that carry no cluster-hash
// label: written before the label existed. Each is relabelled, or removed,
// by the next pass that finds it.
func UnlabelledSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue}).Add(mustRequirement(LabelClusterHash, selection.DoesNotExist))
}

func mustRequirement(key string, op selection.Operator, vals ...string) labels.Requirement {
	r, err := labels.NewRequirement(key, op, vals)
	if err != nil {
		panic(err)
	}
	return *r
}

// Secret returns the downstream copy of src in namespace ns, for o.
//
// The copy has src's name, type, data and immutable, and src's labels and
// annotations except kubectl's last-applied-configuration, every
// "courier.dev/" key and Fleet's copy label; then Courier's own labels and
// annotations. The keys that decide ownership are dropped from the source
// (docs/design.md#fleets-own-copies): a source carrying courier.dev/owner
// (or helmop/upstream/keep) could otherwise make its copy claim another
// HelmOp's ownership, letting that HelmOp's sweep delete it or shielding
// it from its own; one carrying fleet.cattle.io/bundledeployment (Fleet's
// local agent wrote it, or a user did) would make Courier take its own
// copy for Fleet's, stop keeping it in step, and leave it to Fleet's
// uninstall. The result shares no maps
// or slices with src.
func Secret(src *corev1.Secret, ns string, o Owner) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: copyMeta(src, ns, o),
		Type:       src.Type,
		Data:       cloneBytesMap(src.Data),
		Immutable:  copyBool(src.Immutable),
	}
}

// ConfigMap returns the downstream copy of src in namespace ns, for o: name,
// data, binaryData and immutable, with labels and annotations as for Secret.
func ConfigMap(src *corev1.ConfigMap, ns string, o Owner) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: copyMeta(src, ns, o),
		Data:       maps.Clone(src.Data),
		BinaryData: cloneBytesMap(src.BinaryData),
		Immutable:  copyBool(src.Immutable),
	}
}

func copyMeta(src metav1.Object, ns string, o Owner) metav1.ObjectMeta {
	l := filtered(src.GetLabels())
	l[LabelManagedBy] = ManagedByValue
	l[LabelOwner] = OwnerHash(o.UpstreamID, o.HelmOp)
	a := filtered(src.GetAnnotations())
	if bundle, ok := strings.CutPrefix(o.HelmOp.Name, courier.BundleSummaryPrefix); ok {
		a[AnnotationBundle] = o.HelmOp.Namespace + "/" + bundle
	} else {
		a[AnnotationHelmOp] = o.HelmOp.String()
	}
	a[AnnotationUpstream] = o.UpstreamID
	a[AnnotationSourceResourceVersion] = src.GetResourceVersion()
	if o.Cluster != "" {
		l[LabelClusterHash] = ClusterHash(o.UpstreamID, o.HelmOp.Namespace, o.Cluster)
	}
	if o.Keep {
		a[AnnotationKeep] = "true"
	}
	return metav1.ObjectMeta{Name: src.GetName(), Namespace: ns, Labels: l, Annotations: a}
}

func filtered(in map[string]string) map[string]string {
	out := make(map[string]string, len(in)+4)
	for k, v := range in {
		if k != lastApplied && k != FleetCopyLabel && !strings.HasPrefix(k, courierPrefix) {
			out[k] = v
		}
	}
	return out
}

// Ownership is how an existing downstream object relates to an Owner.
type Ownership int

const (
	// NotManaged: no courier.dev/managed-by=courier label. Someone else's
	// object: never overwritten or deleted (phase Conflict).
	NotManaged Ownership = iota
	// OwnedBy: managed by Courier, and the owner label is this Owner's hash.
	OwnedBy
	// OtherOwner: managed by Courier, but the owner label is missing or is
	// not this Owner's hash (another HelmOp or upstream, or a forged label).
	// Not ours to touch either.
	OtherOwner
)

func (o Ownership) String() string {
	switch o {
	case NotManaged:
		return "NotManaged"
	case OwnedBy:
		return "OwnedBy"
	case OtherOwner:
		return "OtherOwner"
	}
	return "Ownership(?)"
}

// OwnershipOf reports how obj relates to o. Only labels count (docs/design.md#removal-and-ownership):
// the annotations are informational and may disagree with them.
func OwnershipOf(obj metav1.Object, o Owner) Ownership {
	l := obj.GetLabels()
	if l[LabelManagedBy] != ManagedByValue {
		return NotManaged
	}
	if l[LabelOwner] != OwnerHash(o.UpstreamID, o.HelmOp) {
		return OtherOwner
	}
	return OwnedBy
}

// ClaimedOwner reads the upstream and HelmOp that a managed object claims in
// its annotations, and whether it was written with keepResources. ok is true
// only if obj has managed-by=courier, both annotations are present and
// well-formed ("<ns>/<name>", both parts non-empty), and the owner label is
// their hash. The sweep deletes an object whose HelmOp is gone only when ok:
// an object whose label and annotations disagree has been edited by someone
// and is never deleted.
//
// keep comes from AnnotationKeep, which the hash does not cover: anyone who
// can edit the copy can set or clear it, but only on a copy that is
// Courier's anyway.
func ClaimedOwner(obj metav1.Object) (Claim, bool) {
	l, a := obj.GetLabels(), obj.GetAnnotations()
	upstream, hasUpstream := a[AnnotationUpstream]
	ns, name, found := strings.Cut(a[AnnotationHelmOp], "/")
	nn := types.NamespacedName{Namespace: ns, Name: name}
	if bundle, isBundle := a[AnnotationBundle]; isBundle {
		if _, hasHelmOp := a[AnnotationHelmOp]; hasHelmOp {
			return Claim{}, false // claims two owners: someone edited it
		}
		ns, name, found = strings.Cut(bundle, "/")
		nn = types.NamespacedName{Namespace: ns, Name: courier.BundleSummaryPrefix + name}
	}
	// A missing owner label reads as "", which no hash equals.
	if l[LabelManagedBy] != ManagedByValue || !hasUpstream || !found || ns == "" || name == "" ||
		strings.Contains(name, "/") || l[LabelOwner] != OwnerHash(upstream, nn) {
		return Claim{}, false
	}
	return Claim{UpstreamID: upstream, HelmOp: nn, clusterHash: l[LabelClusterHash], legacyCluster: a[LegacyAnnotationCluster],
		Keep: a[AnnotationKeep] == "true"}, true
}

// Claim is what a managed copy says about its owner.
type Claim struct {
	UpstreamID string
	HelmOp     types.NamespacedName
	Keep       bool
	// clusterHash is the copy's LabelClusterHash; legacyCluster its
	// LegacyAnnotationCluster, read only when it has no hash.
	clusterHash, legacyCluster string
}

// WrittenFor reports whether the copy was written for the Fleet Cluster
// namespace/name (in the claimed upstream): its cluster hash is that
// Cluster's, or, on a copy without one, its legacy annotation names it. A
// copy naming no Cluster was written for none.
func (c Claim) WrittenFor(namespace, name string) bool {
	if c.clusterHash != "" {
		return c.clusterHash == ClusterHash(c.UpstreamID, namespace, name)
	}
	return c.legacyCluster != "" && c.legacyCluster == name
}

// AdoptWriter makes want keep the Cluster that cur names, when cur is this
// HelmOp's copy written for another Fleet Cluster (docs/design.md#clusters-sharing-a-kube-apiserver).
// Several Clusters may reach one kube-apiserver; a copy any of them wrote
// with the right content is current for all of them, and a write for one of
// them must not rename the copy (or change its keep marker), or each would
// rewrite it in turn. The writer is named by cur's LabelClusterHash, or on
// a copy without one by its LegacyAnnotationCluster. want is changed in
// place; cur is not.
func AdoptWriter(want, cur metav1.Object) {
	wa, wl := want.GetAnnotations(), want.GetLabels()
	if wa == nil || wl == nil {
		return
	}
	cl, ca := cur.GetLabels(), cur.GetAnnotations()
	if h, ok := cl[LabelClusterHash]; ok {
		if h == "" || h == wl[LabelClusterHash] {
			return
		}
		wl[LabelClusterHash] = h
	} else {
		if !writtenForAnother(ca, wl) {
			return
		}
		wa[LegacyAnnotationCluster] = ca[LegacyAnnotationCluster]
		delete(wl, LabelClusterHash) // relabelled by its own Cluster's pass
	}
	if ca[AnnotationKeep] == "true" {
		wa[AnnotationKeep] = "true"
	} else {
		delete(wa, AnnotationKeep)
	}
}

// writtenForAnother reports whether a copy without a cluster hash names,
// in its legacy annotation, a Cluster other than the one whose hash the
// labels wl carry.
func writtenForAnother(curAnnotations, wl map[string]string) bool {
	writer := curAnnotations[LegacyAnnotationCluster]
	if writer == "" {
		return false
	}
	ns, _, _ := strings.Cut(curAnnotations[AnnotationHelmOp], "/")
	if b, ok := curAnnotations[AnnotationBundle]; ok {
		ns, _, _ = strings.Cut(b, "/")
	}
	return ClusterHash(curAnnotations[AnnotationUpstream], ns, writer) != wl[LabelClusterHash]
}

// FleetCopySelector selects Fleet's own copies: every object with
// FleetCopyLabel.
func FleetCopySelector() labels.Selector {
	return labels.NewSelector().Add(mustRequirement(FleetCopyLabel, selection.Exists))
}

// FleetCopy reports whether obj is a copy made by Fleet's own agent, and
// the BundleDeployment it names: it carries FleetCopyLabel and not
// Courier's managed-by label. Courier takes neither from a source
// (copyMeta), so an object with both is a copy of Courier's made from a
// source carrying Fleet's label before that rule: Courier's to correct on
// its next write, and to remove when nothing wants it.
func FleetCopy(obj metav1.Object) (bundleDeployment string, ok bool) {
	l := obj.GetLabels()
	bundleDeployment, ok = l[FleetCopyLabel]
	if !ok || l[LabelManagedBy] == ManagedByValue {
		return "", false
	}
	return bundleDeployment, true
}
