// Package cellstate says how kubectl courier shows one row: the state of
// a cell of the Clusters × sources matrix (a row's phase, with Synced at an
// older version than the source's current one told apart as OutOfDate),
// its character in the terminal, its colours, and how severe it is. The
// text matrix, its legend and the HTML report all draw from this one
// table, so they cannot disagree.
package cellstate

import (
	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
)

// State is what a cell shows.
type State string

// The states: the row phases, OutOfDate (Synced at an older version than
// the source's current one) and None (no row for that Cluster and source).
const (
	Synced        State = "Synced"
	OutOfDate     State = "OutOfDate"
	Pending       State = "Pending"
	Forbidden     State = "Forbidden"
	Conflict      State = "Conflict"
	Denied        State = "Denied"
	Invalid       State = "Invalid"
	Unreachable   State = "Unreachable"
	SourceMissing State = "SourceMissing"
	Deleting      State = "Deleting"
	Kept          State = "Kept"
	None          State = "None"
)

// Style is how a state is drawn.
type Style struct {
	// Char is the cell's character in the terminal (ASCII, so any
	// terminal and any pager shows it).
	Char byte
	// ANSI is the SGR colour code used on a terminal, e.g. "32" for green.
	ANSI string
	// CSS is the cell's background colour in the HTML report.
	CSS string
	// Meaning is the legend's words.
	Meaning string
}

// All lists the states in legend order: most severe first, the way the
// summary's nonReady orders rows, then the healthy and leftover states.
var All = []State{Forbidden, Conflict, Denied, Invalid, Unreachable, SourceMissing, Pending, OutOfDate, Synced, Deleting, Kept, None}

var styles = map[State]Style{
	Forbidden:     {'F', "1;31", "#d7263d", "forbidden: may not write"},
	Conflict:      {'C', "1;35", "#a4036f", "conflict: object not Courier's"},
	Denied:        {'D', "1;31", "#7b0d1e", "denied: never exported"},
	Invalid:       {'I', "1;33", "#e07a00", "invalid entry"},
	Unreachable:   {'U', "1;31", "#5c5c5c", "cluster unreachable"},
	SourceMissing: {'M', "33", "#c9a227", "source missing"},
	Pending:       {'P', "36", "#3aa7d6", "pending"},
	OutOfDate:     {'o', "34", "#3b5bdb", "synced at an older version"},
	Synced:        {'.', "32", "#2b9348", "synced"},
	Deleting:      {'-', "2", "#b0b0b0", "being removed"},
	Kept:          {'k', "2", "#8d99ae", "kept (keepResources)"},
	None:          {' ', "", "#ffffff", "no row"},
}

// StyleOf returns how s is drawn; an unknown state (a phase added to the
// API later) is drawn as '?'.
func StyleOf(s State) Style {
	if st, ok := styles[s]; ok {
		return st
	}
	return Style{'?', "1", "#000000", "unknown phase " + string(s)}
}

// Of returns the state of a row: its phase, or OutOfDate for a row Synced
// at another version than its source's current one.
func Of(row *v1alpha1.DownstreamCopy) State {
	p := row.Status.Phase
	if p == "" {
		return Pending
	}
	if p == v1alpha1.CopyPhaseSynced && row.Spec.Source.ResourceVersion != "" &&
		row.Status.SyncedResourceVersion != row.Spec.Source.ResourceVersion {
		return OutOfDate
	}
	return State(p)
}

// Rank orders states by severity: lower is more severe; unknown states
// rank between the failing ones and Pending.
func Rank(s State) int {
	for i, a := range All {
		if a == s {
			return i
		}
	}
	return 6
}

// Failing reports whether s needs someone to act (the summary's failing
// phases).
func Failing(s State) bool {
	switch s {
	case Forbidden, Conflict, Denied, Invalid, Unreachable, SourceMissing:
		return true
	}
	return false
}

// Ready reports whether a cell in state s counts as done.
func Ready(s State) bool { return s == Synced }

// Leftover reports whether s is a copy nothing wants any more.
func Leftover(s State) bool { return s == Deleting || s == Kept }
