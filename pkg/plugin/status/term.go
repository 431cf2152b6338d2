package status

import (
	"strings"

	"github.com/courier-dev/courier/pkg/plugin/cellstate"
)

// Options say how to draw.
type Options struct {
	// Width is the terminal's width in columns (80 when unknown).
	Width int
	// Color draws cells and states in colour (ANSI SGR); only on a terminal.
	Color bool
	// All shows every Cluster of a large matrix, ready ones included.
	All bool
	// AllNamespaces adds the NAMESPACE column to the owner list.
	AllNamespaces bool
}

// FullMatrixClusters is the most Clusters a matrix shows without All;
// beyond it only the Clusters not ready are drawn and the others counted.
const FullMatrixClusters = 60

func (o Options) width() int {
	if o.Width < 20 {
		return 80
	}
	return o.Width
}

// paint wraps s in the state's colour when o.Color.
func (o Options) paint(st cellstate.State, s string) string {
	code := cellstate.StyleOf(st).ANSI
	if !o.Color || code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// fit shortens s to at most n columns, cutting its middle (the ends of a
// Cluster's name tell Clusters apart: prod-eu-0001, prod-eu-0002).
func fit(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 3 {
		return s[:n]
	}
	head := (n - 1) / 2
	tail := n - 1 - head
	return s[:head] + "~" + s[len(s)-tail:]
}

// wrap breaks text into lines of at most width columns, each starting
// with indent; a word longer than a line stays whole.
func wrap(text string, indent string, width int) []string {
	var lines []string
	line := indent
	for _, w := range strings.Fields(text) {
		if line != indent && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	if line != indent {
		lines = append(lines, line)
	}
	return lines
}
