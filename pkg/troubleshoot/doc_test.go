package troubleshoot

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/troubleshooting.md from the table")

const (
	docPath = "../../docs/troubleshooting.md"
	begin   = "<!-- BEGIN generated from pkg/troubleshoot (go test ./pkg/troubleshoot -update); edit the table there -->\n"
	end     = "<!-- END generated from pkg/troubleshoot -->\n"
)

// TestDocMatchesTable: the "Rows" section of docs/troubleshooting.md is
// the table `kubectl courier why` reads, word for word.
func TestDocMatchesTable(t *testing.T) {
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q markers", docPath, begin, end)
	}
	want := "\n" + Markdown() + "\n"
	if got := doc[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(docPath, []byte(doc[:i+len(begin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s differs from the table in pkg/troubleshoot; run go test ./pkg/troubleshoot -update.\ngot:\n%s\nwant:\n%s", docPath, got, want)
	}
}
