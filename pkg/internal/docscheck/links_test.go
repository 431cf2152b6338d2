package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// link is a Markdown inline link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading is a Markdown ATX heading.
var heading = regexp.MustCompile(`^#{1,6}\s+(.*)$`)

// inlineLink is a link inside a heading, whose text alone makes the anchor.
var inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// anchorOf makes a heading's anchor as GitHub does: lower case, every
// character but letters, digits, '-', '_' and spaces dropped, spaces
// turned into '-'.
func anchorOf(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings (outside code
// fences), a repeated one numbered as GitHub numbers it.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		m := heading.FindStringSubmatch(line)
		if fence || m == nil {
			continue
		}
		a := anchorOf(m[1])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestLinksResolve: every relative link of the README and docs/ names a
// file that exists and, with a #fragment into a Markdown file, a heading
// of that file, so that the way from the README to a fix (a phase, a
// troubleshooting entry, an install step) cannot break silently.
func TestLinksResolve(t *testing.T) {
	top := root(t)
	files, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(top, "README.md"))
	cache := map[string]map[string]bool{}
	checked := 0
	for _, f := range files {
		doc := read(t, f)
		rel, _ := filepath.Rel(top, f)
		for _, m := range link.FindAllStringSubmatch(doc, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links %s: no such file", rel, target)
				continue
			}
			checked++
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if cache[dest] == nil {
				cache[dest] = anchors(read(t, dest))
			}
			if !cache[dest][frag] {
				t.Errorf("%s links %s: no heading with that anchor", rel, target)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the pattern is broken")
	}
}

func TestAnchorOf(t *testing.T) {
	for in, want := range map[string]string{
		"Export safety":      "export-safety",
		"Fleet's own copies": "fleets-own-copies",
		"2b. Helm":           "2b-helm",
		"On a real container runtime (`make test-node`)":                     "on-a-real-container-runtime-make-test-node",
		"Scale-out ownership (`pkg/sharding`; [scale-out.md](scale-out.md))": "scale-out-ownership-pkgsharding-scale-outmd",
	} {
		if got := anchorOf(in); got != want {
			t.Errorf("anchorOf(%q) = %q, want %q", in, got, want)
		}
	}
}
