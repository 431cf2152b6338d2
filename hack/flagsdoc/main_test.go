package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestFlagsDocCurrent fails when docs/flags.md is not what `make flags`
// would write from the binaries' flag sets now, as hack/verify-codegen.sh
// fails on stale generated code.
func TestFlagsDocCurrent(t *testing.T) {
	want, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatalf("%v (write it with: make flags)", err)
	}
	got := Render()
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/flags.md is out of date (regenerate with: make flags); first difference at line %d:\n  file:      %q\n  generated: %q", i+1, w, g)
			}
		}
	}
}

// TestRenderHasBothBinaries guards the generator itself: both commands'
// own flags, Courier's and the agent's, must be in what it renders.
func TestRenderHasBothBinaries(t *testing.T) {
	doc := string(Render())
	for _, want := range []string{"## courier-apiserver", "## courier-agent", "`--shard-buckets`", "`--report-interval`", "`--version`"} {
		if !strings.Contains(doc, want) {
			t.Errorf("rendered doc lacks %s", want)
		}
	}
}

// TestRenderIgnoresTheMachine: what a default computed from the machine
// would be does not reach the page, or it would differ between machines.
func TestRenderIgnoresTheMachine(t *testing.T) {
	t.Setenv("POD_NAME", "")
	a := Render()
	t.Setenv("POD_NAME", "some-pod-0")
	b := Render()
	if !bytes.Equal(a, b) {
		t.Error("the rendered page depends on POD_NAME")
	}
	if bytes.Contains(b, []byte("some-pod-0")) {
		t.Error("the rendered page holds this machine's POD_NAME")
	}
}

func TestFirstSentence(t *testing.T) {
	for in, want := range map[string]string{
		"One. Two.":                   "One.",
		"Uses e.g. a Lease. Then":     "Uses e.g. a Lease.",
		"Waits 1.5 s for it. More":    "Waits 1.5 s for it.",
		"no period":                   "no period",
		"Spread\nover   lines. Next.": "Spread over lines.",
		"A path a/b.c then. done":     "A path a/b.c then. done",
	} {
		if got := firstSentence(in); got != want {
			t.Errorf("firstSentence(%q) = %q, want %q", in, got, want)
		}
	}
}
