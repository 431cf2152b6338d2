package docscheck

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// root is the repository's top directory: the nearest parent holding go.mod.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// citation matches what a clone cannot follow: a numbered section of a
// design file the repository does not hold (the word DESIGN, optionally
// DESIGN.md, then a section sign) and an issue number (the word issue, in
// any case, a space and a digit).
var citation = regexp.MustCompile(`(?i)DESIGN(\.md)?\s*§|issue [0-9]`)

// TestNoUnfollowableCitations: pkg/, cmd/, docs/ and the README cite
// docs/design.md by anchor (docs/design.md#export-safety) or say what
// they mean.
func TestNoUnfollowableCitations(t *testing.T) {
	top := root(t)
	var files []string
	for _, dir := range []string{"pkg", "cmd", "docs"} {
		err := filepath.WalkDir(filepath.Join(top, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files = append(files, filepath.Join(top, "README.md"))
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
			continue // not text
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if m := citation.FindString(sc.Text()); m != "" {
				rel, _ := filepath.Rel(top, path)
				t.Errorf("%s:%d cites %q: cite a docs/design.md anchor or say it in words", rel, n, m)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// TestREADMEFitsTwoScreens: at most 200 lines.
func TestREADMEFitsTwoScreens(t *testing.T) {
	lines := strings.Count(read(t, filepath.Join(root(t), "README.md")), "\n")
	if lines > 200 {
		t.Errorf("README.md has %d lines, at most 200: move detail to a doc under docs/", lines)
	}
}

// cells splits a Markdown table row into its cells (a "\|" stays in its
// cell).
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var out []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' && i+1 < len(line) && line[i+1] == '|' {
			cur.WriteString(`\|`)
			i++
			continue
		}
		if line[i] == '|' {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(line[i])
	}
	return append(out, strings.TrimSpace(cur.String()))
}

// TestREADMETableCellsShort: no table cell of the README over 120
// characters; detail belongs in the doc the row links to.
func TestREADMETableCellsShort(t *testing.T) {
	inFence := false
	for n, line := range strings.Split(read(t, filepath.Join(root(t), "README.md")), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		for _, c := range cells(line) {
			if l := utf8.RuneCountInString(c); l > 120 {
				t.Errorf("README.md:%d: a table cell of %d characters, at most 120: %.60s...", n+1, l, c)
			}
		}
	}
}

// TestEveryDocLinked: every page under docs/ is linked from the README,
// and indexed by docs/README.md.
func TestEveryDocLinked(t *testing.T) {
	top := root(t)
	readme := read(t, filepath.Join(top, "README.md"))
	index := read(t, filepath.Join(top, "docs", "README.md"))
	docs, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs under docs/")
	}
	for _, d := range docs {
		name := filepath.Base(d)
		if !strings.Contains(readme, "](docs/"+name) {
			t.Errorf("README.md does not link docs/%s", name)
		}
		if name != "README.md" && !strings.Contains(index, "]("+name) {
			t.Errorf("docs/README.md does not index %s", name)
		}
	}
}

// TestLayoutListsEveryDirectory: the README's layout names every
// directory directly under cmd/ and pkg/, so that a new package cannot
// be left out of it.
func TestLayoutListsEveryDirectory(t *testing.T) {
	top := root(t)
	layout := section(read(t, filepath.Join(top, "README.md")), "## Layout")
	if layout == "" {
		t.Fatal(`README.md has no "## Layout" section`)
	}
	var dirs []string
	for _, parent := range []string{"cmd", "pkg"} {
		entries, err := os.ReadDir(filepath.Join(top, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, parent+"/"+e.Name())
			}
		}
	}
	if len(dirs) < 3 {
		t.Fatalf("found only %v under cmd/ and pkg/", dirs)
	}
	for _, d := range dirs {
		if !regexp.MustCompile(`(^|[^\w/-])` + regexp.QuoteMeta(d) + `([^\w-]|$)`).MatchString(layout) {
			t.Errorf("README.md's layout does not list %s/", d)
		}
	}
}

// TestREADMENamesTheCommands: a newcomer's two commands.
func TestREADMENamesTheCommands(t *testing.T) {
	readme := read(t, filepath.Join(root(t), "README.md"))
	for _, c := range []string{"make run", "make test"} {
		if !strings.Contains(readme, c) {
			t.Errorf("README.md does not say %q", c)
		}
	}
}

// section returns the text from the heading line to the next heading of
// the same level, or "".
func section(doc, heading string) string {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return ""
	}
	rest := doc[i+1+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
