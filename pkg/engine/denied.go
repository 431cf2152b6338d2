package engine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/courier-dev/courier/pkg/apis/courier"
	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
)

// A row whose source may never be exported (docs/design.md#export-safety)
// is Denied by the view, its only judge; the engine is handed it all the
// same (desiredCopy.denied), to do two things the view cannot, since only
// the deliverer sees the Cluster:
//
//   - remove the copy Courier made before, even one written with
//     keepResources (the sweep; a leak is retracted), and say so;
//   - look for Fleet's own copy of the source there, which Courier never
//     touches, and say that Fleet exported it.
//
// What it found is the row's record: phase Denied and a note, which the
// view adds to its own message (the phase stays the view's), and a
// Warning Event on the owner when the note is new. The note travels as
// any record does (the relay, the status object other replicas read, an
// agent's report), so the rows say it whoever delivers.

// Reasons of the Warning Events about Denied rows.
const (
	// ReasonExportRetracted: a copy written with keepResources was
	// removed, its source having become one that is never exported.
	ReasonExportRetracted = "ExportRetracted"
	// ReasonExportedByFleet: Fleet's own agent copied a source that is
	// never exported; Courier leaves Fleet's object alone.
	ReasonExportedByFleet = "ExportedByFleet"
)

// retractedNote is the record of a Denied row whose kept copy the sweep
// removed.
func retractedNote(kind, namespace, name, cluster string) string {
	return fmt.Sprintf("%s %s/%s, written with keepResources, was removed from cluster %s: its source may never be exported", kind, namespace, name, cluster)
}

// fleetExported begins every FleetExportNote.
const fleetExported = "Fleet's own agent exported it: "

// FleetExportNote is the record of a Denied row whose source Fleet's own
// agent copied to the Cluster (its BundleDeployment named).
func FleetExportNote(kind, namespace, name, cluster, bundleDeployment string) string {
	return fmt.Sprintf(fleetExported+"%s %s/%s in cluster %s is Fleet's copy (BundleDeployment %s); "+
		"Courier leaves Fleet's object alone, and only the admission policy keeps such a source out of an owner's list",
		kind, namespace, name, cluster, bundleDeployment)
}

// retracted records the removal of a copy written with keepResources
// whose source became denied: the row's note and a Warning Event.
func (e *Engine) retracted(ctx context.Context, cluster *fleet.Cluster, c desiredCopy, obj object) {
	klog.FromContext(ctx).Info("Removed a copy kept with keepResources: its source may never be exported", "cluster", cluster.Namespace+"/"+cluster.Name,
		"owner", c.helmOp.String(), "kind", c.kind, "object", obj.GetNamespace()+"/"+obj.GetName())
	note := retractedNote(c.kind, obj.GetNamespace(), obj.GetName(), cluster.Name)
	if e.record(c.rowKey, copycontract.Status{Phase: courier.CopyPhaseDenied, Message: note}) {
		e.notify()
	}
	if e.cfg.Recorder != nil {
		e.cfg.Recorder.Event(e.helmOpRef(c.helmOp), corev1.EventTypeWarning, ReasonExportRetracted, note)
	}
}

// noteDenied looks, for each denied row of the Cluster, for Fleet's own
// copy of its source, and records what it found. A row with a retraction
// note keeps it while no Fleet copy is there. It reports whether a record
// changed.
func (e *Engine) noteDenied(ctx context.Context, client *downstream.Client, cluster *fleet.Cluster, copies []desiredCopy) bool {
	changed := false
	for _, c := range copies {
		if !c.denied || client.ForeignAt == nil {
			continue
		}
		obj, found, known := client.ForeignAt(c.kind, c.targetNS, c.name)
		if !known {
			continue
		}
		bd := ""
		if found {
			bd, _ = copyspec.FleetCopy(obj)
		}
		prev, _ := e.statuses.status(c.rowKey)
		next := copycontract.Status{Phase: courier.CopyPhaseDenied}
		switch {
		case bd != "":
			next.Message = FleetExportNote(c.kind, c.targetNS, c.name, cluster.Name, bd)
		case prev.Phase == courier.CopyPhaseDenied && prev.Message == retractedNote(c.kind, c.targetNS, c.name, cluster.Name):
			continue
		}
		if !e.record(c.rowKey, next) {
			continue
		}
		changed = true
		if bd != "" {
			klog.FromContext(ctx).Info("Fleet's own agent exported a source that is never exported", "cluster", cluster.Namespace+"/"+cluster.Name,
				"owner", c.helmOp.String(), "kind", c.kind, "object", c.targetNS+"/"+c.name, "bundleDeployment", bd)
			if e.cfg.Recorder != nil && e.delivers(cluster.Namespace+"/"+cluster.Name) {
				e.cfg.Recorder.Event(e.helmOpRef(c.helmOp), corev1.EventTypeWarning, ReasonExportedByFleet, next.Message)
			}
		}
	}
	return changed
}

// AgentNoted records the Warning Event for a note a courier-agent
// reported on a Denied row of owner (the owner's key,
// copycontract.OwnerKey): the Event a pushed Cluster's pass records
// itself. The agent has no rights to record Events upstream; the replica
// that kept its report does.
func (e *Engine) AgentNoted(owner types.NamespacedName, note string) {
	if e.cfg.Recorder == nil {
		return
	}
	reason := ReasonExportRetracted
	if strings.HasPrefix(note, fleetExported) {
		reason = ReasonExportedByFleet
	}
	e.cfg.Recorder.Event(e.helmOpRef(owner), corev1.EventTypeWarning, reason, note)
}
