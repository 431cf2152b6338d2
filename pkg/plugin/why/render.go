package why

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/cellstate"
	"github.com/courier-dev/courier/pkg/plugin/load"
	"github.com/courier-dev/courier/pkg/troubleshoot"
)

// maxEvents is the most Events shown, the newest.
const maxEvents = 5

// Render writes the explanation; now dates the Events and the last sync.
func Render(w io.Writer, f *Facts, now time.Time) error {
	var b strings.Builder
	r := f.Row
	st := cellstate.Of(r)
	owner := load.OwnerOf(r)
	fmt.Fprintf(&b, "Row:          %s (namespace %s)\n", r.Name, r.Namespace)
	fmt.Fprintf(&b, "Owner:        %s\n", owner)
	fmt.Fprintf(&b, "Cluster:      %s\n", r.Spec.Cluster)
	fmt.Fprintf(&b, "Source:       %s %s/%s, %s\n", r.Spec.Source.Kind, r.Namespace, r.Spec.Source.Name, rv(r.Spec.Source.ResourceVersion, "does not exist"))
	fmt.Fprintf(&b, "Copy:         %s %s/%s in Cluster %s, %s\n", r.Spec.Source.Kind, r.Spec.Target.Namespace, r.Spec.Target.Name, r.Spec.Cluster, copyVersion(r, st))
	fmt.Fprintf(&b, "Phase:        %s\n", phaseLine(r, st))
	fmt.Fprintf(&b, "Message:      %s\n", orNone(r.Status.Message))
	if r.Status.LastSyncTime != nil {
		fmt.Fprintf(&b, "Last synced:  %s ago\n", duration.HumanDuration(now.Sub(r.Status.LastSyncTime.Time)))
	}
	fmt.Fprintf(&b, "Delivered by: %s\n", deliveredBy(f.DeliveredBy))
	fmt.Fprintf(&b, "Reachability: %s\n", reachability(f.ClusterRows, r.Spec.Cluster))
	advice(&b, r, st)
	events(&b, f, owner, now)
	_, err := io.WriteString(w, b.String())
	return err
}

func rv(v, missing string) string {
	if v == "" {
		return missing
	}
	return "resourceVersion " + v
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// copyVersion compares the copy's version with the source's.
func copyVersion(r *v1alpha1.DownstreamCopy, st cellstate.State) string {
	synced := r.Status.SyncedResourceVersion
	switch {
	case synced == "":
		return "not written from any version yet"
	case st == cellstate.OutOfDate:
		return fmt.Sprintf("made from resourceVersion %s: older than the source's %s, the new version is not copied yet", synced, r.Spec.Source.ResourceVersion)
	case synced == r.Spec.Source.ResourceVersion:
		return fmt.Sprintf("made from resourceVersion %s: the source's current one", synced)
	}
	return fmt.Sprintf("made from resourceVersion %s (the source is at %s)", synced, orNone(r.Spec.Source.ResourceVersion))
}

func phaseLine(r *v1alpha1.DownstreamCopy, st cellstate.State) string {
	if st == cellstate.OutOfDate {
		return "Synced, at an older version of the source (shown as OutOfDate)"
	}
	return string(r.Status.Phase)
}

func deliveredBy(s string) string {
	switch s {
	case "":
		return "not known (the server's table has no DELIVERED-BY cell)"
	case "agent":
		return "agent (the Cluster's courier-agent pulls its copies)"
	case "leader":
		return "leader (the Courier replica holding the Lease)"
	case "<none>":
		return "<none>: nobody delivers this Cluster right now: no Courier replica holds its bucket, " +
			"or its agent annotation names no agent Courier can recognise (its rows are Invalid, saying why)"
	}
	return s + " (the Courier replica holding this Cluster's bucket)"
}

// reachability says whether Courier reaches the Cluster, from its rows.
func reachability(rows []v1alpha1.DownstreamCopy, cluster string) string {
	unreachable, msg := 0, ""
	for i := range rows {
		if rows[i].Status.Phase == v1alpha1.CopyPhaseUnreachable {
			unreachable++
			msg = rows[i].Status.Message
		}
	}
	if unreachable > 0 {
		return fmt.Sprintf("unreachable: %d of %d rows of Cluster %s say so: %s", unreachable, len(rows), cluster, msg)
	}
	return fmt.Sprintf("reached: no row of Cluster %s is Unreachable (%d rows in this namespace)", cluster, len(rows))
}

// advice writes what the troubleshooting table says about the row.
func advice(b *strings.Builder, r *v1alpha1.DownstreamCopy, st cellstate.State) {
	b.WriteString("\n")
	switch st {
	case cellstate.Synced:
		b.WriteString("What to do:   nothing: the copy is current.\n")
		return
	case cellstate.OutOfDate:
		b.WriteString("What to do:   wait: the new version is copied within seconds; if it stays, kubectl courier rollout status says when it is done and what fails.\n")
		return
	}
	p, e := troubleshoot.Lookup(string(r.Status.Phase), r.Status.Message)
	anchor := "docs/troubleshooting.md#" + strings.ToLower(string(r.Status.Phase))
	if p == nil {
		fmt.Fprintf(b, "What to do:   the troubleshooting table has no entry for phase %s; see docs/phases.md.\n", r.Status.Phase)
		return
	}
	if p.Intro != "" {
		fmt.Fprintf(b, "About:        %s\n", troubleshoot.Plain(p.Intro))
	}
	if e == nil {
		fmt.Fprintf(b, "What to do:   no entry of the table matches this message; the %s entries are in %s.\n", p.Phase, anchor)
		return
	}
	fmt.Fprintf(b, "Cause:        %s\n", troubleshoot.Plain(e.Cause))
	fmt.Fprintf(b, "What to do:   %s\n", troubleshoot.Plain(e.Fix))
	fmt.Fprintf(b, "See:          %s\n", anchor)
}

func events(b *strings.Builder, f *Facts, owner load.Owner, now time.Time) {
	b.WriteString("\n")
	if f.EventsErr != nil {
		fmt.Fprintf(b, "Events:       not read: %v\n", f.EventsErr)
		return
	}
	if len(f.Events) == 0 {
		fmt.Fprintf(b, "Events:       none about %s/%s in Cluster %s on %s (Events last an hour by default)\n",
			f.Row.Spec.Source.Kind, f.Row.Spec.Source.Name, f.Row.Spec.Cluster, owner)
		return
	}
	fmt.Fprintf(b, "Events (on %s, the last %d about this copy):\n", owner, min(maxEvents, len(f.Events)))
	evs := f.Events[max(0, len(f.Events)-maxEvents):]
	for _, e := range evs {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		age := "?"
		if !at.IsZero() {
			age = duration.HumanDuration(now.Sub(at))
		}
		fmt.Fprintf(b, "  %-5s %-7s %-12s %s\n", age, e.Type, e.Reason, e.Message)
	}
}
