package rowstatus

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
)

// A row's status has one composer, Compose, and every path that writes a
// row's status goes through it: the view's sync of a HelmOp, the refresh
// of rows whose record changed, a source's new version, a report, the
// answer of the status endpoint (Reported) and the rows of leftover
// copies. It takes
//
//   - the base: what the view alone decides from the row's spec and its
//     source's export verdict (Base, and the view's Denied): Invalid,
//     SourceMissing, Denied or Pending; for the row of a leftover copy,
//     the Kept or Deleting the engine found;
//   - the deliverer's record of the row: the engine's copycontract.Status
//     for a pushed Cluster this replica delivers to, the entry its
//     deliverer published (clusterstatus.Store.Publish) for one it does not,
//     the entry its agent reported for a pulled one, or none;
//   - for a pulled Cluster, how its agent's reports stand: heard within
//     its deadline, awaited (nothing yet), silent (heard, then nothing for
//     MissedIntervals of its intervals) or never heard
//     (nothing for that many default intervals since the view first saw
//     the Cluster pulled).
//
// The first rule of precedence that matches decides what shows. So the
// view alone decides Invalid, SourceMissing and Denied, and a deliverer's
// word shows only on a row the view found Pending.

// deliverer is who delivers a row's copy, and for a pulled Cluster how its
// agent's reports stand.
type deliverer int

const (
	anyDeliverer    deliverer = iota
	byEngine                  // a pushed Cluster this replica delivers to: its engine
	byReplica                 // a pushed Cluster another replica (or process) delivers to: what it published
	agentHeard                // pulled; its agent reported within its deadline
	agentAwaited              // pulled; no report from its agent yet, not overdue
	agentSilent               // pulled; its agent was heard, then nothing for MissedIntervals intervals
	agentNeverHeard           // pulled; no report for MissedIntervals default intervals since it was seen pulled
	byNobody                  // nobody delivers (a malformed agent annotation): why
)

// recordIs is what the deliverer recorded of the row.
type recordIs int

const (
	recordAny    recordIs = iota
	hasRecord             // it has a record of the row
	noRecord              // it has none
	recordOfCopy          // its record names a copy made (a synced resourceVersion)
	recordNote            // its record is Denied with a note: what it found of a denied source downstream
)

// shows is what the composed status shows.
type shows int

const (
	showBase        shows = iota // the base as it is
	showBaseAndCopy              // the base, saying the copy made earlier stays (synced RV and time from the record)
	showBaseAndNote              // the base, followed by the record's note
	showRecord                   // the deliverer's record
	showAwaited                  // Pending, naming the agent waited for and since when
	showUnreachable              // Unreachable, saying when the agent was last heard (the record's synced RV and time kept)
	showNobody                   // Invalid, saying why nobody delivers
)

// precedenceRule is one row of the precedence table.
type precedenceRule struct {
	base   courier.CopyPhase
	by     deliverer
	record recordIs
	shows  shows
}

// precedence is the precedence table: the first rule whose base, deliverer
// and record match decides (docs/design-decisions.md repeats it).
var precedence = []precedenceRule{
	// The view's verdicts on the spec, and leftover copies: no deliverer
	// changes them.
	{courier.CopyPhaseInvalid, anyDeliverer, recordAny, showBase},
	// A Denied row says what its deliverer found downstream: its kept copy
	// removed, or Fleet's own copy there (docs/design.md#export-safety).
	{courier.CopyPhaseDenied, anyDeliverer, recordNote, showBaseAndNote},
	{courier.CopyPhaseDenied, anyDeliverer, recordAny, showBase},
	{courier.CopyPhaseKept, anyDeliverer, recordAny, showBase},
	{courier.CopyPhaseDeleting, anyDeliverer, recordAny, showBase},
	// A missing source stays SourceMissing, saying so when a copy stays.
	{courier.CopyPhaseSourceMissing, anyDeliverer, recordOfCopy, showBaseAndCopy},
	{courier.CopyPhaseSourceMissing, anyDeliverer, recordAny, showBase},
	// Pending: nobody to deliver first, an overdue agent next, then a waited-for agent, then the
	// deliverer's record, else the base.
	{courier.CopyPhasePending, byNobody, recordAny, showNobody},
	{courier.CopyPhasePending, agentSilent, recordAny, showUnreachable},
	{courier.CopyPhasePending, agentNeverHeard, recordAny, showUnreachable},
	{courier.CopyPhasePending, agentAwaited, recordAny, showAwaited},
	{courier.CopyPhasePending, agentHeard, noRecord, showAwaited},
	{courier.CopyPhasePending, anyDeliverer, hasRecord, showRecord},
	{courier.CopyPhasePending, byEngine, noRecord, showBase},
	{courier.CopyPhasePending, byReplica, noRecord, showBase},
}

// Delivery is what a row's deliverer says of it, as Compose takes it.
type Delivery struct {
	// Record is the engine's record of the row, or its agent's reported
	// entry; nil when there is none.
	Record *copycontract.Status
	// Agent is the pulled Cluster's agent; nil for a pushed Cluster.
	Agent *Agent
	// FromReplica: a pushed Cluster this replica does not deliver to (or
	// has not passed over since it gained it); Record is what its
	// deliverer published.
	FromReplica bool
	// Nobody says why nobody delivers the row's Cluster (delivery.Of);
	// "" when someone does.
	Nobody string
}

// Agent is how a pulled Cluster's agent's reports stand.
type Agent struct {
	User    string
	Cluster types.NamespacedName
	// LastHeard is its last heartbeat, zero when it never reported, and
	// Interval the report interval it last reported.
	LastHeard time.Time
	Interval  time.Duration
	// Since is when the view first saw the Cluster pulled: what a row
	// waits for its agent's first report since.
	Since time.Time
	// Overdue: its deadline has passed: MissedIntervals of its interval
	// after LastHeard, or of DefaultInterval after Since when it never
	// reported.
	Overdue bool
}

func (d Delivery) deliverer() deliverer {
	switch {
	case d.Nobody != "":
		return byNobody
	case d.Agent == nil && d.FromReplica:
		return byReplica
	case d.Agent == nil:
		return byEngine
	case d.Agent.LastHeard.IsZero() && d.Agent.Overdue:
		return agentNeverHeard
	case d.Agent.LastHeard.IsZero():
		return agentAwaited
	case d.Agent.Overdue:
		return agentSilent
	}
	return agentHeard
}

func (r precedenceRule) matches(base courier.CopyPhase, d Delivery) bool {
	if r.base != base || (r.by != anyDeliverer && r.by != d.deliverer()) {
		return false
	}
	switch r.record {
	case hasRecord:
		return d.Record != nil
	case noRecord:
		return d.Record == nil
	case recordOfCopy:
		return d.Record != nil && d.Record.SyncedResourceVersion != ""
	case recordNote:
		return d.Record != nil && d.Record.Phase == courier.CopyPhaseDenied && d.Record.Message != ""
	}
	return true
}

// ruleFor returns the index of the rule that decides, -1 when none does
// (a base phase the view never computes: it shows as it is).
func ruleFor(base courier.CopyPhase, d Delivery) int {
	for i, r := range precedence {
		if r.matches(base, d) {
			return i
		}
	}
	return -1
}

// Compose returns a row's status from its base, the Cluster it is for and
// what its deliverer says (see precedence).
func Compose(base courier.DownstreamCopyStatus, cluster string, d Delivery) courier.DownstreamCopyStatus {
	if d.Record != nil && d.Record.Phase == courier.CopyPhaseDenied && base.Phase != courier.CopyPhaseDenied {
		// Denied is the view's alone: a deliverer's Denied record is its
		// note on a Denied row, and says nothing of any other row (one the
		// view allowed again before the deliverer forgot it).
		d.Record = nil
	}
	i := ruleFor(base.Phase, d)
	if i < 0 {
		return base
	}
	var s courier.DownstreamCopyStatus
	switch precedence[i].shows {
	case showBase:
		return base
	case showBaseAndCopy:
		s = New(base.Phase, fmt.Sprintf("%s; the copy made from resourceVersion %s stays in cluster %s",
			base.Message, d.Record.SyncedResourceVersion, cluster))
	case showRecord:
		s = New(d.Record.Phase, d.Record.Message)
	case showBaseAndNote:
		if strings.HasSuffix(base.Message, "; "+d.Record.Message) {
			return base // composed before (Reported starts from the row as shown)
		}
		return New(base.Phase, base.Message+"; "+d.Record.Message)
	case showAwaited:
		return New(courier.CopyPhasePending, d.Agent.awaited())
	case showUnreachable:
		s = New(courier.CopyPhaseUnreachable, d.Agent.unreachable())
	case showNobody:
		return New(courier.CopyPhaseInvalid, d.Nobody)
	}
	if d.Record != nil {
		s.SyncedResourceVersion = d.Record.SyncedResourceVersion
		s.LastSyncTime = d.Record.LastSyncTime
	}
	return s
}

// awaited is the message of a row waiting for its agent's first report.
func (a *Agent) awaited() string {
	if a.LastHeard.IsZero() {
		return fmt.Sprintf("waiting for the courier-agent %s of Cluster %s to report: nothing since %s, when the Cluster was seen pulled; Unreachable after %s without a report",
			a.User, a.Cluster, a.Since.UTC().Format(time.RFC3339), MissedIntervals*DefaultInterval)
	}
	// Concatenated, not formatted: every pulled row of a changed source
	// shows it on every replica until its agent reports.
	return "waiting for the courier-agent " + a.User + " of Cluster " + a.Cluster.String() + " to report"
}

// unreachable is the message of a row whose agent is overdue.
func (a *Agent) unreachable() string {
	if a.LastHeard.IsZero() {
		return fmt.Sprintf("the courier-agent %s of Cluster %s has never reported: nothing since %s, when the Cluster was seen pulled, for %d default intervals (%s)",
			a.User, a.Cluster, a.Since.UTC().Format(time.RFC3339), MissedIntervals, DefaultInterval)
	}
	return fmt.Sprintf("the courier-agent %s of Cluster %s was last heard at %s and reports every %s: nothing for %d intervals",
		a.User, a.Cluster, a.LastHeard.UTC().Format(time.RFC3339), a.Interval, MissedIntervals)
}

// Reported is the status the status endpoint answers an agent's report
// with: row's status as it will show with reported as its agent's fresh
// record. A row whose copy is not delivered keeps the status the view gave
// it (Denied, Kept, Deleting); any other row's base is computed from its
// spec, as the view computes it.
func Reported(row *courier.DownstreamCopy, reported copycontract.Status) courier.DownstreamCopyStatus {
	base := row.Status
	if courier.Delivered(row.Labels) {
		base = Base(row.Namespace, row.Spec)
	}
	// The agent is heard: it reports now (any time will do for a heard,
	// not overdue agent).
	rec := reported
	return Compose(base, row.Spec.Cluster, Delivery{Record: &rec, Agent: &Agent{
		Cluster: types.NamespacedName{Namespace: row.Namespace, Name: row.Spec.Cluster}, LastHeard: time.Now()}})
}
