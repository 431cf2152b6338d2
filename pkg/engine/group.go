package engine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/downstream"
)

// syncGroup plans, checks and writes one group's copies. It returns one
// outcome per copy, and an error when the cluster is unreachable.
func (e *Engine) syncGroup(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, group []desiredCopy,
	fallback func() (bool, error), namespaces map[string]bool) ([]outcome, error) {
	out := make([]outcome, len(group))
	all := func(o outcome) []outcome {
		for i := range out {
			out[i] = o
		}
		return out
	}
	plans := make([]plan, len(group))
	for i, c := range group {
		plans[i] = e.planCopy(ctx, client, cluster, c)
		if plans[i].out.fatal != nil {
			return all(plans[i].out), plans[i].out.fatal
		}
	}
	if !e.delivers(cluster.Namespace + "/" + cluster.Name) {
		return observed(cluster, group, plans, e.writerName()), nil
	}
	if !needsWrite(plans) {
		for i := range plans {
			out[i] = plans[i].out
		}
		return out, nil // nothing to write: no identity needed
	}
	// Who writes is only looked up when something is to be written, so a
	// pass over current copies costs no request.
	id, refusal, err := e.resolveIdentity(ctx, client, group[0].serviceAccount, fallback)
	if err != nil {
		o := e.writeFailed(cluster, "looking up the ServiceAccount", err)
		return all(o), o.fatal
	}
	if refusal != "" {
		copiesTotal.WithLabelValues("failed", "Forbidden").Inc()
		return all(outcome{retry: true, reason: "Forbidden", eventOK: true,
			status: copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: refusal}}), nil
	}
	if id.serviceAccount != "" {
		needs, o := e.accessNeeded(ctx, client, cluster, group, plans, namespaces)
		if o != nil {
			return all(*o), o.fatal
		}
		denied, err := e.checkAccess(ctx, id, needs)
		if err != nil {
			o := e.writeFailed(cluster, "checking the permissions of "+id.user(), err)
			return all(o), o.fatal
		}
		if denied != "" {
			if group[0].serviceAccount == "" {
				e.fallbacks.forget(client.Key) // ask again whether the fallback exists
			}
			copiesTotal.WithLabelValues("failed", "Forbidden").Inc()
			return all(outcome{retry: true, reason: "Forbidden", eventOK: true,
				status: copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: fmt.Sprintf("cluster %s: %s", cluster.Name, denied)}}), nil
		}
	}
	makeNamespace := func(ns string) error {
		if o := e.ensureNamespace(ctx, client, id, cluster, ns); o != nil {
			return o.fatal // nil unless unreachable: its copies then try again, alone, and say why
		}
		namespaces[ns] = true
		return nil
	}
	fatal := e.writeGroup(len(group), namespaces, plans, group, makeNamespace, func(i int) outcome {
		o := e.execute(ctx, client, id, cluster, group[i], plans[i], namespaces)
		if o.status.Phase == courier.CopyPhaseForbidden {
			id.refused() // cached allows may be stale: ask again next pass
			if group[0].serviceAccount == "" {
				e.fallbacks.forget(client.Key) // and whether the fallback exists
			}
		}
		out[i] = o
		return o
	})
	return out, fatal
}

// needsWrite reports whether any plan writes.
func needsWrite(plans []plan) bool {
	for _, p := range plans {
		if p.action != actionNone {
			return true
		}
	}
	return false
}

// accessNeeded lists what a ServiceAccount needs to carry out plans: for a
// copy to create, the namespace too when it does not exist (read here, and
// remembered in namespaces). It returns an outcome for every copy when
// reading a namespace failed.
//
// Courier's own identity is not checked, so it never reads namespaces: a
// create makes its namespace and takes AlreadyExists for an answer
// (ensureNamespace), one round trip where a read and then a create were
// two.
func (e *Engine) accessNeeded(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, group []desiredCopy, plans []plan,
	namespaces map[string]bool) ([]access, *outcome) {
	var needs []access
	for i, c := range group {
		resource := strings.ToLower(c.kind) + "s"
		switch plans[i].action {
		case actionCreate:
			exists, ok := namespaces[c.targetNS]
			if !ok {
				var o *outcome
				if exists, o = e.namespaceExists(ctx, client, cluster, c.targetNS); o != nil {
					return nil, o
				}
				namespaces[c.targetNS] = exists
			}
			if !exists {
				needs = append(needs, access{verb: "create", resource: "namespaces", name: c.targetNS})
			}
			needs = append(needs, access{verb: "create", resource: resource, namespace: c.targetNS})
		case actionUpdate:
			needs = append(needs, access{verb: "update", resource: resource, namespace: c.targetNS})
		case actionRecreate:
			needs = append(needs, access{verb: "delete", resource: resource, namespace: c.targetNS},
				access{verb: "create", resource: resource, namespace: c.targetNS})
		}
	}
	return needs, nil
}

// namespaceExists reads a destination namespace with Courier's own
// identity.
func (e *Engine) namespaceExists(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, ns string) (bool, *outcome) {
	_, err := client.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		o := e.writeFailed(cluster, "reading namespace "+ns, err)
		return false, &o
	}
	return err == nil, nil
}

// ensureNamespace creates a destination namespace not known to exist, as
// id; one that exists already is fine. An identity that may not create
// namespaces is refused even where the namespace exists (authorization
// comes first), so a refusal is followed by a read: an existing namespace
// is then fine too.
func (e *Engine) ensureNamespace(ctx context.Context, client *downstream.Client, id identity, cluster *fleet.Cluster, ns string) *outcome {
	err := createNamespace(ctx, id, ns)
	if apierrors.IsForbidden(err) {
		if exists, o := e.namespaceExists(ctx, client, cluster, ns); o != nil || exists {
			return o
		}
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		o := e.writeFailed(cluster, fmt.Sprintf("creating namespace %s as %s", ns, id.user()), err)
		return &o
	}
	return nil
}

// observed is what a replica that does not deliver to the Cluster records
// for a group: what its plans found, with copies that need a write shown
// as Pending, naming writer as who writes them. It checks no permission
// and writes nothing.
func observed(cluster *fleet.Cluster, group []desiredCopy, plans []plan, writer string) []outcome {
	out := make([]outcome, len(group))
	for i, c := range group {
		what := describe(c.kind, c.targetNS, c.name)
		switch plans[i].action {
		case actionNone:
			out[i] = plans[i].out
		case actionCreate:
			out[i] = outcome{status: copycontract.Status{Phase: courier.CopyPhasePending,
				Message: fmt.Sprintf("%s does not exist in cluster %s yet; %s writes it", what, cluster.Name, writer)}}
		default:
			out[i] = outcome{status: copycontract.Status{Phase: courier.CopyPhasePending,
				Message: fmt.Sprintf("%s in cluster %s differs from its source; %s updates it", what, cluster.Name, writer)}}
		}
	}
	return out
}

// createNamespace creates ns downstream as id, once admitted (admitWrite).
func createNamespace(ctx context.Context, id identity, ns string) error {
	ctx, end, err := admitWrite(ctx)
	if err != nil {
		return err
	}
	defer end()
	_, err = id.writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{FieldManager: "courier"})
	return err
}
