// Package copyview computes the DownstreamCopy rows: one per (HelmOp,
// targeted Cluster, listed resource), from informer caches of Fleet's
// objects and of the metadata of Secrets and ConfigMaps. It holds no secret
// data: sources are seen through metadata-only informers, so neither the
// rows nor this package's memory ever contain what a Secret holds.
package copyview

import (
	"context"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	corev1 "k8s.io/api/core/v1"

	"github.com/google/uuid"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/exportpolicy"
	fleetlisters "github.com/courier-dev/courier/pkg/generated/listers/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/rowstatus"
	"github.com/courier-dev/courier/pkg/targeting"
)

// Labels Courier puts on each row so that label selectors can pick rows by
// HelmOp, cluster or kind. A value that is not a valid label value (a name
// longer than 63 characters) is left out; field selectors still work.
const (
	LabelHelmOp     = "courier.dev/helmop"
	LabelBundle     = "courier.dev/bundle"
	LabelCluster    = "courier.dev/cluster"
	LabelSourceKind = "courier.dev/source-kind"
)

// Inputs are the caches rows are computed from.
type Inputs struct {
	HelmOps fleetlisters.HelmOpLister
	// Bundles are the Bundles whose lists the view reads too (docs/design.md#inputs);
	// nil when the cluster serves no Bundles.
	Bundles       fleetlisters.BundleLister
	Clusters      fleetlisters.ClusterLister
	ClusterGroups fleetlisters.ClusterGroupLister
	// Secrets and ConfigMaps list metadata only (PartialObjectMetadata).
	Secrets    cache.GenericLister
	ConfigMaps cache.GenericLister
	// AgentNamespace is where a HelmOp's ServiceAccount lives downstream.
	AgentNamespace string
	// Reports are the agents' reports for pulled Clusters (pulled.go); nil
	// when there are none to read.
	Reports Reports
	// Exports decides which sources may be exported at all (docs/design.md#export-safety):
	// a row of a denied source is Denied and delivered by no
	// one. Nil denies only what the courier.dev/export annotation denies.
	Exports *exportpolicy.Policy
	// SecretTypes tells the types of listed Secrets, which the metadata
	// informers do not carry; nil takes every Secret to be Opaque.
	SecretTypes SecretTypes
}

// SecretTypes tells the type of a Secret, by UID (a Secret's type never
// changes), and whether its data holds a kubeconfig, by resourceVersion,
// without handing its data on; exportpolicy.SecretTypes is the real one.
type SecretTypes interface {
	Type(ctx context.Context, namespace, name string, uid types.UID) (corev1.SecretType, error)
	// KubeconfigContent reports whether the Secret at resourceVersion rv
	// holds a kubeconfig carrying credentials; only the answer is kept.
	KubeconfigContent(ctx context.Context, namespace, name string, uid types.UID, rv string) (bool, error)
	// Forget drops what is known of a Secret that is gone.
	Forget(uid types.UID)
}

// Problem is something wrong with an owner (a HelmOp or a Bundle) that has
// no row of its own to show it on (for example an invalid cluster
// selector).
type Problem struct {
	// Owner is the owner's key (copycontract.OwnerKey).
	Owner types.NamespacedName
	Err   error
}

// ComputeHelmOp returns one HelmOp's rows, sorted by name: one per Cluster
// of its namespace that it targets and resource listed for that Cluster,
// with the phase Courier can tell without a copy engine (rowstatus.Base):
// Invalid for entries that cannot be copied, SourceMissing when the source
// does not exist, Denied when it may not be exported, else Pending. Its
// cost is that of targeting the Clusters of one namespace and looking up
// the HelmOp's sources (each source's export verdict once).
func ComputeHelmOp(ctx context.Context, in Inputs, op *fleet.HelmOp) ([]*courier.DownstreamCopy, []Problem, error) {
	return computeOwner(ctx, in, helmOpOwner(op))
}

// ComputeBundle returns one Bundle's rows, as ComputeHelmOp does for a
// HelmOp, with the Bundle's targeting; none for a Bundle made from a
// HelmOp.
func ComputeBundle(ctx context.Context, in Inputs, b *fleet.Bundle) ([]*courier.DownstreamCopy, []Problem, error) {
	o := bundleOwner(b)
	if o == nil {
		return nil, nil, nil
	}
	return computeOwner(ctx, in, o)
}

func computeOwner(ctx context.Context, in Inputs, o *owner) ([]*courier.DownstreamCopy, []Problem, error) {
	ws, err := listWorkspace(in, o.key.Namespace)
	if err != nil {
		return nil, nil, err
	}
	rows, problems, err := computeRows(ctx, in, o, ws)
	if err != nil {
		return nil, nil, err
	}
	sortRows(rows)
	return dedupe(rows), problems, nil
}

// workspace is what targeting needs of one namespace (a Fleet workspace).
type workspace struct {
	clusters []*fleet.Cluster
	groups   []*fleet.ClusterGroup
}

func listWorkspace(in Inputs, namespace string) (*workspace, error) {
	clusters, err := in.Clusters.Clusters(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	groups, err := in.ClusterGroups.ClusterGroups(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return &workspace{clusters: clusters, groups: groups}, nil
}

// computeRows returns an owner's rows, unsorted.
func computeRows(ctx context.Context, in Inputs, o *owner, ws *workspace) ([]*courier.DownstreamCopy, []Problem, error) {
	var rows []*courier.DownstreamCopy
	var problems []Problem
	matches, errs := o.resolve(ws.clusters, ws.groups)
	for _, e := range errs {
		problems = append(problems, Problem{Owner: o.key, Err: e})
	}
	exports := newExportCheck(ctx, in)
	for _, m := range matches {
		for _, res := range m.Options.Resources {
			row, err := rowFor(in, exports, o, m, res)
			if err != nil {
				return nil, nil, err
			}
			rows = append(rows, row)
		}
	}
	// A denied source is also a problem of its HelmOp: logged once, and a
	// Warning Event, naming the source and the rule (never its data).
	for _, v := range exports.denied() {
		problems = append(problems, Problem{Owner: o.key, Err: deniedProblem(v.Message)})
	}
	return rows, problems, nil
}

// sortRows sorts rows by namespace and name.
func sortRows(rows []*courier.DownstreamCopy) {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
}

// dedupe drops rows whose names collide (possible only when sanitising maps
// two distinct entries onto one name); the first, in sorted order, wins.
func dedupe(rows []*courier.DownstreamCopy) []*courier.DownstreamCopy {
	out := rows[:0]
	for i, r := range rows {
		if i > 0 && r.Namespace == rows[i-1].Namespace && r.Name == rows[i-1].Name {
			continue
		}
		out = append(out, r)
	}
	return out
}

func rowFor(in Inputs, exports *exportCheck, o *owner, m targeting.Match, res fleet.DownstreamResource) (*courier.DownstreamCopy, error) {
	ns := o.key.Namespace
	name := RowName(o.key.Name, m.Cluster.Name, res.Kind, res.Name)
	row := &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			UID:       rowUID(ns, name),
			Labels:    rowLabels(o.spec, m.Cluster.Name, res.Kind, true),
		},
		Spec: courier.DownstreamCopySpec{
			Owner:          o.spec,
			HelmOp:         helmOpName(o.spec),
			GitRepo:        o.gitRepo,
			Cluster:        m.Cluster.Name,
			Source:         courier.CopySource{Kind: res.Kind, Name: res.Name},
			Target:         courier.CopyTarget{Namespace: m.Options.Namespace, Name: res.Name},
			ServiceAccount: serviceAccountRef(in.AgentNamespace, m.Options.ServiceAccount),
			KeepResources:  m.Options.KeepResources,
		},
	}
	var verdict exportpolicy.Verdict
	if kind, ok := copycontract.SupportedKind(res.Kind); ok && res.Name != "" {
		row.Spec.Source.Kind = kind
		lister := in.Secrets
		if kind == "ConfigMap" {
			lister = in.ConfigMaps
		}
		obj, err := lister.ByNamespace(ns).Get(res.Name)
		switch {
		case err == nil:
			accessor, err := meta.Accessor(obj)
			if err != nil {
				return nil, err
			}
			row.Spec.Source.ResourceVersion = accessor.GetResourceVersion()
			if verdict, err = exports.verdict(kind, accessor); err != nil {
				return nil, err
			}
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	row.Status = rowstatus.Base(row.Namespace, row.Spec)
	if verdict.Denied() && copycontract.Copyable(row.Spec) {
		deny(row, verdict)
	}
	return row, nil
}

// helmOpName is spec.helmOp of an owner's rows: the HelmOp's name, empty
// for a Bundle.
func helmOpName(o courier.CopyOwner) string {
	if o.Kind == courier.OwnerKindHelmOp {
		return o.Name
	}
	return ""
}

// rowLabels are a row's labels: its owner (LabelHelmOp or LabelBundle),
// Cluster and kind, and whether its copy is delivered (LabelDeliver).
func rowLabels(o courier.CopyOwner, cluster, kind string, deliver bool) map[string]string {
	l := map[string]string{courier.LabelDeliver: strconv.FormatBool(deliver)}
	ownerLabel := LabelHelmOp
	if o.Kind == courier.OwnerKindBundle {
		ownerLabel = LabelBundle
	}
	for k, v := range map[string]string{ownerLabel: o.Name, LabelCluster: cluster, LabelSourceKind: strings.ToLower(kind)} {
		if len(validation.IsValidLabelValue(v)) == 0 {
			l[k] = v
		}
	}
	return l
}

// rowUID is derived from the row's identity so that every replica, and every
// restart, gives a row the same UID.
func rowUID(namespace, name string) types.UID {
	return types.UID(uuid.NewSHA1(uuid.NameSpaceOID, []byte("courier.dev/downstreamcopies/"+namespace+"/"+name)).String())
}

// serviceAccountRef names a HelmOp's ServiceAccount as "<namespace>/<name>"
// in the downstream agent namespace; "" when the HelmOp names none (the
// engine then picks a fallback, and the row's message says which).
func serviceAccountRef(agentNamespace, name string) string {
	if name == "" {
		return ""
	}
	if agentNamespace == "" {
		agentNamespace = fleet.SystemNamespace
	}
	return agentNamespace + "/" + name
}
