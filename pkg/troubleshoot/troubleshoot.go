// Package troubleshoot holds the troubleshooting table of the
// downstreamcopies rows: for each phase, the messages Courier writes, their
// cause and the fix. It is the one source of truth of both the "Rows"
// section of docs/troubleshooting.md (generated from it; a test fails when
// the two differ) and `kubectl courier why`, which looks a row's message up
// in it, so the advice a user reads in the terminal is the documented one.
package troubleshoot

import (
	"fmt"
	"regexp"
	"strings"
)

// Phase is one phase's part of the table.
type Phase struct {
	// Phase is the row phase, e.g. Forbidden.
	Phase string
	// Intro says what the phase means in general, in Markdown; may be empty.
	Intro string
	// Entries are the messages of the phase.
	Entries []Entry
}

// Entry is one message: what Courier writes, why, and what to do. Each
// field is Markdown; Message quotes the message in code spans with
// placeholders in angle brackets and "..." for any text.
type Entry struct {
	Message string
	Cause   string
	Fix     string
	// Match, when set, is the regular expression a row's message must
	// match, for entries whose Message shows an example rather than the
	// exact form; it counts as more specific than any code span.
	Match string
}

// Phases returns the table, in the documented order.
func Phases() []Phase { return rows }

// Lookup returns the table's part for phase and the entry whose message
// best matches message (nil when none matches): an entry matches when one
// of the code spans of its Message matches part of message, placeholders
// standing for any text; among those, the one with the most literal text
// wins, so a specific message beats a generic one.
func Lookup(phase, message string) (*Phase, *Entry) {
	for i := range rows {
		p := &rows[i]
		if p.Phase != phase {
			continue
		}
		var best *Entry
		bestScore := 0
		for j := range p.Entries {
			if s := entryScore(&p.Entries[j], message); s > bestScore {
				best, bestScore = &p.Entries[j], s
			}
		}
		return p, best
	}
	return nil, nil
}

var (
	codeSpan    = regexp.MustCompile("`([^`]+)`")
	placeholder = regexp.MustCompile(`<[^<>]+>|\.\.\.`)
	mdLink      = regexp.MustCompile(`\[([^\]]+)\]\(([^)]+)\)`)
)

// entryScore is how specifically e matches message, 0 when it does not.
func entryScore(e *Entry, message string) int {
	if e.Match != "" {
		if regexp.MustCompile(e.Match).MatchString(message) {
			return 1 << 20
		}
		return 0
	}
	return score(e.Message, message)
}

// score is the literal length of the longest code span of pattern that
// matches message, 0 when none does.
func score(pattern, message string) int {
	best := 0
	for _, m := range codeSpan.FindAllStringSubmatch(pattern, -1) {
		span := m[1]
		literal := placeholder.ReplaceAllString(span, "")
		if len(strings.TrimSpace(literal)) < 4 {
			continue // too little text to tell one message from another
		}
		var re strings.Builder
		last := 0
		for _, loc := range placeholder.FindAllStringIndex(span, -1) {
			re.WriteString(regexp.QuoteMeta(span[last:loc[0]]))
			re.WriteString(`.*?`)
			last = loc[1]
		}
		re.WriteString(regexp.QuoteMeta(span[last:]))
		if regexp.MustCompile("(?s)"+re.String()).MatchString(message) && len(literal) > best {
			best = len(literal)
		}
	}
	return best
}

// Plain turns the table's Markdown into text for a terminal: links become
// "text (docs/target)"; code spans keep their backquotes.
func Plain(md string) string {
	return mdLink.ReplaceAllStringFunc(md, func(l string) string {
		m := mdLink.FindStringSubmatch(l)
		target := m[2]
		if !strings.Contains(target, "://") && !strings.HasPrefix(target, "#") {
			target = "docs/" + target
			if file, _, _ := strings.Cut(m[2], "#"); file == m[1] {
				return target // [rbac.md](rbac.md#x) reads docs/rbac.md#x
			}
		}
		return fmt.Sprintf("%s (%s)", m[1], target)
	})
}

// Markdown renders the table as the "Rows" section of
// docs/troubleshooting.md shows it: one heading per phase, its
// introduction, and a message | cause | fix table.
func Markdown() string {
	var b strings.Builder
	for i, p := range rows {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n", p.Phase)
		if p.Intro != "" {
			b.WriteString(p.Intro + "\n\n")
		}
		b.WriteString("| message | cause | fix |\n|---|---|---|\n")
		for _, e := range p.Entries {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", e.Message, e.Cause, e.Fix)
		}
	}
	return b.String()
}
