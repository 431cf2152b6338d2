package copysummary

import (
	"strconv"
	"strings"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// The bounds of status.message: it names at most examplesPerPhase rows per
// phase, each row's message cut at rowMessageMax bytes, and is cut at
// MaxMessage bytes in all.
const (
	examplesPerPhase = 3
	rowMessageMax    = 200
	MaxMessage       = 1024
)

// OutOfDate is the label status.message gives rows that are Synced at an
// older version of their source than the current one.
const OutOfDate = "OutOfDate"

// message sums up the not-ready rows (grouped as notReadyGroups groups
// them) in Fleet's style, one group per phase, most severe first:
//
//	Forbidden(7) [Cluster fleet-default/a: ...; Cluster fleet-default/b: ...; and 5 more]; Pending(2) [...]
//
// It is "" when every wanted row is ready.
func message(namespace string, groups []notReadyGroup) string {
	var b strings.Builder
	for _, g := range groups {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(g.label + "(" + strconv.Itoa(g.count) + ") [")
		for k, r := range g.first[:min(len(g.first), examplesPerPhase)] {
			if k > 0 {
				b.WriteString("; ")
			}
			b.WriteString("Cluster " + namespace + "/" + r.Cluster + ": " + truncate(rowMessage(r), rowMessageMax))
		}
		if more := g.count - examplesPerPhase; more > 0 {
			b.WriteString("; and " + strconv.Itoa(more) + " more")
		}
		b.WriteString("]")
		if b.Len() > MaxMessage {
			break
		}
	}
	return truncate(b.String(), MaxMessage)
}

// groupLabel is the phase a not-ready row is counted under in the message.
func groupLabel(r Row) string {
	if r.Phase == courier.CopyPhaseSynced {
		return OutOfDate
	}
	return string(r.Phase)
}

// rowMessage is what the message says of one row: its own message, or,
// for a row synced at an older version, which one.
func rowMessage(r Row) string {
	if r.Phase == courier.CopyPhaseSynced {
		return r.Source.Kind + " " + r.Source.Name + " copied at resourceVersion " + r.SyncedRV + ", not the current one"
	}
	if r.Message == "" {
		return r.Source.Kind + " " + r.Source.Name
	}
	return r.Message
}

// truncate cuts s at n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
