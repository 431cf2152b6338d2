package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/fixture"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// source serves one fleet's summary and rows; an error, when set, is
// every call's answer.
type source struct {
	sum  v1alpha1.DownstreamCopySummary
	rows []v1alpha1.DownstreamCopy
	err  error
}

var _ load.Source = (*source)(nil)

func (s *source) ListSummaries(context.Context, string) ([]v1alpha1.DownstreamCopySummary, error) {
	return []v1alpha1.DownstreamCopySummary{s.sum}, s.err
}
func (s *source) GetSummary(_ context.Context, ns, name string) (*v1alpha1.DownstreamCopySummary, error) {
	if s.err != nil {
		return nil, s.err
	}
	if name != s.sum.Name {
		return nil, fmt.Errorf("downstreamcopysummaries %q: %w", name, load.ErrNotFound)
	}
	return &s.sum, nil
}
func (s *source) WatchSummary(context.Context, string, string, string) (watch.Interface, error) {
	return nil, errors.New("not used")
}
func (s *source) ListRows(context.Context, string, fields.Selector) ([]v1alpha1.DownstreamCopy, error) {
	return s.rows, s.err
}
func (s *source) GetRow(context.Context, string, string) (*v1alpha1.DownstreamCopy, error) {
	return nil, errors.New("not used")
}
func (s *source) RowCells(context.Context, string, string) (map[string]string, error) {
	return nil, errors.New("not used")
}
func (s *source) Events(context.Context, string, string, string) ([]corev1.Event, error) {
	return nil, nil
}

func run(src load.Source, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	root := newRoot(Streams{Out: &out, ErrOut: &errOut}, src)
	root.SetArgs(append(args, "-n", "fleet-default"))
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(&errOut, "error:", err)
		return out.String(), errOut.String(), 1
	}
	return out.String(), errOut.String(), 0
}

func example() *source {
	f := fixture.Fleet{Namespace: "fleet-default", HelmOp: "example", Clusters: 2, Sources: 1,
		Phase: func(i, j int, c string) (v1alpha1.CopyPhase, string, bool) {
			if i == 1 {
				return v1alpha1.CopyPhaseConflict, "Secret app/source-01 exists in cluster " + c + " and is not managed by Courier; it is left unchanged", false
			}
			return v1alpha1.CopyPhaseSynced, "", false
		}}
	rows := f.Rows()
	return &source{sum: fixture.Summary("fleet-default", "example", rows), rows: rows}
}

// TestStatusNotATerminal: output to a pipe has no colour and no control
// character, even where colour would be drawn on a terminal; --color
// always draws it.
func TestStatusNotATerminal(t *testing.T) {
	out, errOut, code := run(example(), "status", "example")
	if code != 0 || !strings.Contains(out, "downstream") && !strings.Contains(out, "c0002 C") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if cc := fixture.ControlChars(out); len(cc) > 0 {
		t.Errorf("control characters on a pipe: %q", cc)
	}
	colored, _, _ := run(example(), "status", "example", "--color", "always")
	if !strings.Contains(colored, "\x1b[1;35mC\x1b[0m") {
		t.Errorf("--color always drew no colour:\n%q", colored)
	}
}

func TestStatusOutputs(t *testing.T) {
	out, _, code := run(example(), "status", "example", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "kind: DownstreamCopySummary") || !strings.Contains(out, "syncedCopies: 1") {
		t.Errorf("-o yaml: exit %d:\n%s", code, out)
	}
	out, _, code = run(example(), "status", "-o", "json")
	if code != 0 || !strings.Contains(out, `"kind": "DownstreamCopySummaryList"`) {
		t.Errorf("-o json: exit %d:\n%s", code, out)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		src  load.Source
		want string
	}{
		{[]string{"status", "nope"}, example(), `HelmOp "nope" has no copies in namespace fleet-default`},
		{[]string{"status", "a/b"}, example(), `give a HelmOp's name, or bundle:<name>`},
		{[]string{"status", "example", "-A"}, example(), "use -n, not -A"},
		{[]string{"status", "--color", "pink"}, example(), "--color must be auto, always or never"},
		{[]string{"status", "--width", "-3"}, example(), "--width must be positive"},
		{[]string{"status", "-o", "wide"}, example(), "status supports -o json or -o yaml"},
		{[]string{"report", "-o", "yaml"}, example(), "report supports -o html only"},
		{[]string{"rollout", "status", "example", "--fail-after", "-1s"}, example(), "--fail-after must not be negative"},
		{[]string{"why", "a", "b"}, example(), "give a row's name, or OWNER CLUSTER SOURCE"},
		{[]string{"status"}, &source{err: errors.New("forbidden: you may not list downstreamcopysummaries.courier.dev")}, "forbidden: you may not list"},
	} {
		out, errOut, code := run(tc.src, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
