// Package clusterstatus keeps every Cluster's status object in the
// upstream cluster: one ConfigMap per Cluster, in Courier's own namespace,
// so that every replica shows the same rows and a restart loses nothing.
// For a pulled Cluster it holds what its courier-agent reports through the
// status subresource (docs/design.md#pull-delivery; the agent's side is
// pkg/agent/report); for a pushed Cluster, what its deliverer's engine
// recorded (Publish, pushed.go, docs/design.md#scale-out). The agents'
// heartbeats between two status changes are kept apart (pkg/liveness).
//
// A report holds status fields only -- phase, message, the source
// resourceVersion the copy was made from, when it was last synced -- and
// the agent's heartbeat as of the report's last write: when it was heard
// and its report interval. It never holds data: the status subresource
// takes nothing else from the agent's request. A report is written only
// when a row's status changes (Store.Record); heartbeats in between are
// kept apart, in each replica's memory and digests (pkg/liveness).
//
// The report object of Cluster <ns>/<name> is the ConfigMap
// courier-agent-report.<ns>.<name> (a namespace name has no dots, so the
// name is unambiguous), or courier-agent-report.<40 hex of sha256> when
// that would exceed 253 characters. It is labelled
// courier.dev/agent-report=true and names its Cluster in the annotations
// courier.dev/cluster-namespace and courier.dev/cluster. Its data holds
// one key per row (the row's name; a JSON Entry) and the key _heartbeat (a
// JSON Heartbeat) or, for a pushed Cluster, _leftovers (its leftover
// copies, see leftovers.go), which no row name can be: row names are
// lower-case DNS subdomains.
package clusterstatus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/internal/statusobjects"
	"github.com/courier-dev/courier/pkg/liveness"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

const (
	// Label marks report ConfigMaps; Courier's informer selects only them.
	Label = "courier.dev/agent-report"
	// AnnotationClusterNamespace and AnnotationCluster name the report's
	// Cluster (a long name is hashed in the object's name).
	AnnotationClusterNamespace = "courier.dev/cluster-namespace"
	AnnotationCluster          = "courier.dev/cluster"
	// HeartbeatKey is the data key of the heartbeat.
	HeartbeatKey = "_heartbeat"
	// namePrefix starts every report's name.
	namePrefix = "courier-agent-report."

	// MaxMessageBytes caps a reported message; a longer one is cut.
	MaxMessageBytes = 1024
	// maxResourceVersionBytes caps syncedResourceVersion: a resourceVersion
	// is a short opaque string, and anything longer is not one.
	maxResourceVersionBytes = 128
)

// Entry is what the agent reported for one row.
type Entry struct {
	Phase                 courier.CopyPhase `json:"phase"`
	Message               string            `json:"message,omitempty"`
	SyncedResourceVersion string            `json:"syncedResourceVersion,omitempty"`
	LastSyncTime          *metav1.Time      `json:"lastSyncTime,omitempty"`
}

// Heartbeat is when the agent was last heard, and how often it reports.
type Heartbeat struct {
	LastHeard metav1.MicroTime `json:"lastHeard"`
	Interval  metav1.Duration  `json:"interval"`
}

// Report is a Cluster's report as Courier keeps it. Reports handed out by
// a Store are shared: callers must not modify them.
type Report struct {
	Cluster types.NamespacedName
	// Heartbeat is zero when the report has none.
	Heartbeat Heartbeat
	// Rows are the entries by row name.
	Rows map[string]Entry
	// Leftovers are a pushed Cluster's leftover copies as its deliverer
	// found them (LeftoversKey), in the order it published them.
	Leftovers []copycontract.Leftover
}

// Deadline is when the agent's rows turn Unreachable unless it is heard
// from again: rowstatus.MissedIntervals report intervals after it was last heard.
// It is the zero time for a report without a heartbeat.
func (r *Report) Deadline() time.Time {
	if r == nil || r.Heartbeat.LastHeard.IsZero() {
		return time.Time{}
	}
	return r.Heartbeat.LastHeard.Add(rowstatus.MissedIntervals * r.Heartbeat.Interval.Duration)
}

// ObjectName is the name of the report ConfigMap of a Cluster.
func ObjectName(cluster types.NamespacedName) string {
	name := namePrefix + cluster.Namespace + "." + cluster.Name
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(cluster.Namespace + "/" + cluster.Name))
	return namePrefix + hex.EncodeToString(sum[:])[:40]
}

// knownPhases are the phases a report may carry: those of docs/design.md#the-downstreamcopy-view.
// Denied is the view's verdict alone; an agent reports it only with its
// note on a row the view made Denied (its kept copy removed, or Fleet's
// copy found), and the view shows such a record on no other row.
var knownPhases = []courier.CopyPhase{
	courier.CopyPhasePending, courier.CopyPhaseSynced, courier.CopyPhaseSourceMissing,
	courier.CopyPhaseForbidden, courier.CopyPhaseConflict, courier.CopyPhaseUnreachable,
	courier.CopyPhaseInvalid, courier.CopyPhaseDeleting, courier.CopyPhaseKept, courier.CopyPhaseDenied,
}

// FromStatusUpdate reads a status update an agent sent for a row: the
// entry (status fields only; everything else in obj is ignored) and the
// report interval of its courier.dev/report-interval annotation,
// rowstatus.DefaultInterval when absent. Invalid values are field errors; a message
// over MaxMessageBytes is cut, not refused.
func FromStatusUpdate(obj *courier.DownstreamCopy) (Entry, time.Duration, field.ErrorList) {
	var errs field.ErrorList
	st := obj.Status
	phasePath := field.NewPath("status", "phase")
	if !isKnownPhase(st.Phase) {
		valid := make([]string, len(knownPhases))
		for i, p := range knownPhases {
			valid[i] = string(p)
		}
		errs = append(errs, field.NotSupported(phasePath, st.Phase, valid))
	}
	if len(st.SyncedResourceVersion) > maxResourceVersionBytes {
		errs = append(errs, field.TooLong(field.NewPath("status", "syncedResourceVersion"), "", maxResourceVersionBytes))
	}
	interval := rowstatus.DefaultInterval
	annPath := field.NewPath("metadata", "annotations").Key(courier.AnnotationReportInterval)
	if v, ok := obj.Annotations[courier.AnnotationReportInterval]; ok {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(annPath, v, "must be a Go duration such as 30s (the agent's --report-interval)"))
		case d < liveness.MinInterval || d > liveness.MaxInterval:
			errs = append(errs, field.Invalid(annPath, v, fmt.Sprintf("must be between %s and %s", liveness.MinInterval, liveness.MaxInterval)))
		default:
			interval = d
		}
	}
	e := Entry{
		Phase:                 st.Phase,
		Message:               truncate(st.Message, MaxMessageBytes),
		SyncedResourceVersion: st.SyncedResourceVersion,
	}
	if st.LastSyncTime != nil {
		t := metav1.NewTime(st.LastSyncTime.Time)
		e.LastSyncTime = &t
	}
	return e, interval, errs
}

func isKnownPhase(p courier.CopyPhase) bool {
	for _, k := range knownPhases {
		if p == k {
			return true
		}
	}
	return false
}

// truncate cuts s to at most n bytes of valid UTF-8, ending in "..." when
// it was cut.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const more = "..."
	if n <= len(more) {
		return ""
	}
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// decode reads a report ConfigMap. It returns false for one that does not
// name a Cluster, or whose name is not that Cluster's report name.
// Entries that cannot be read are skipped: a row without an entry shows
// that its agent has not reported on it yet.
func decode(cm *corev1.ConfigMap) (*Report, bool) {
	c := types.NamespacedName{Namespace: cm.Annotations[AnnotationClusterNamespace], Name: cm.Annotations[AnnotationCluster]}
	if c.Namespace == "" || c.Name == "" || ObjectName(c) != cm.Name {
		return nil, false
	}
	r := &Report{Cluster: c, Rows: make(map[string]Entry, len(cm.Data))}
	for k, v := range cm.Data {
		if k == HeartbeatKey {
			_ = json.Unmarshal([]byte(v), &r.Heartbeat)
			continue
		}
		if k == LeftoversKey {
			r.Leftovers = decodeLeftovers(c, v)
			continue
		}
		var e Entry
		if err := json.Unmarshal([]byte(v), &e); err == nil {
			r.Rows[k] = e
		}
	}
	return r, true
}

// encode returns the data of a report. When it would exceed statusobjects.MaxDataBytes,
// messages are shortened step by step (256, 64, then 0 bytes); a report
// still over the bound is an error.
func encode(r *Report) (map[string]string, error) {
	for _, limit := range []int{MaxMessageBytes, 256, 64, 0} {
		data := make(map[string]string, len(r.Rows)+1)
		size := 0
		for row, e := range r.Rows {
			e.Message = truncate(e.Message, limit)
			b, err := json.Marshal(e)
			if err != nil {
				return nil, err
			}
			data[row] = string(b)
			size += len(row) + len(b)
		}
		left, err := encodeLeftovers(r.Leftovers, limit)
		if err != nil {
			return nil, err
		}
		if left != "" {
			data[LeftoversKey] = left
			size += len(LeftoversKey) + len(left)
		}
		if !r.Heartbeat.LastHeard.IsZero() {
			b, err := json.Marshal(r.Heartbeat)
			if err != nil {
				return nil, err
			}
			data[HeartbeatKey] = string(b)
			size += len(HeartbeatKey) + len(b)
		}
		if size <= statusobjects.MaxDataBytes {
			return data, nil
		}
	}
	return nil, fmt.Errorf("the report of Cluster %s would exceed %d bytes with %d rows, even without messages", r.Cluster, statusobjects.MaxDataBytes, len(r.Rows))
}

// newObject returns the report ConfigMap of a Cluster, with data.
func newObject(namespace string, cluster types.NamespacedName, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      ObjectName(cluster),
			Labels:    map[string]string{Label: "true"},
			Annotations: map[string]string{
				AnnotationClusterNamespace: cluster.Namespace,
				AnnotationCluster:          cluster.Name,
			},
		},
		Data: data,
	}
}
