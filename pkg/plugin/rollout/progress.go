package rollout

import (
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// Lines writes one line each time the counts change, and a last line:
// for logs, CI and pipes (no control characters).
type Lines struct {
	Out   io.Writer
	Owner load.Owner
	last  string
}

var _ Progress = (*Lines)(nil)

// Observe writes the counts when they changed.
func (l *Lines) Observe(s *v1alpha1.DownstreamCopySummary, _ time.Time) {
	if ready(s) {
		return // Done says it
	}
	line := fmt.Sprintf("Waiting for %s: %s", l.Owner, counts(s))
	if line != l.last {
		fmt.Fprintln(l.Out, line)
		l.last = line
	}
}

// Done writes the outcome when Ready (the error is the command's to print).
func (l *Lines) Done(s *v1alpha1.DownstreamCopySummary, _ time.Time, err error) {
	if err == nil && s != nil {
		fmt.Fprintf(l.Out, "%s: every copy synced at its source's current version (%d copies, %d Clusters)\n",
			l.Owner, s.Status.Copies, s.Status.Clusters)
	}
}

// counts says where a summary stands, and why it is not Ready.
func counts(s *v1alpha1.DownstreamCopySummary) string {
	c := readyCondition(s)
	out := fmt.Sprintf("%d of %d copies synced, %d of %d Clusters ready", s.Status.SyncedCopies, s.Status.Copies,
		s.Status.ReadyClusters, s.Status.Clusters)
	if s.Status.Failing > 0 {
		out += fmt.Sprintf(", %d failing", s.Status.Failing)
	}
	if c.Reason != "" {
		out += " (" + c.Reason + ")"
	}
	return out
}

// Bar redraws one line on a terminal: a bar of synced/total, the rate
// since the wait began, the time left at that rate, and the reason.
type Bar struct {
	Out   io.Writer
	Owner load.Owner
	// Width is the terminal's width.
	Width      int
	start      time.Time
	startCount int32
	drawn      bool
}

var _ Progress = (*Bar)(nil)

// Observe redraws the line.
func (b *Bar) Observe(s *v1alpha1.DownstreamCopySummary, now time.Time) {
	if b.start.IsZero() {
		b.start, b.startCount = now, s.Status.SyncedCopies
	}
	fmt.Fprint(b.Out, "\r\x1b[K"+b.line(s, now))
	b.drawn = true
}

// Done ends the line.
func (b *Bar) Done(s *v1alpha1.DownstreamCopySummary, now time.Time, err error) {
	if b.drawn {
		fmt.Fprint(b.Out, "\r\x1b[K")
	}
	if err == nil && s != nil {
		fmt.Fprintf(b.Out, "%s: every copy synced at its source's current version (%d copies, %d Clusters) in %v\n",
			b.Owner, s.Status.Copies, s.Status.Clusters, now.Sub(b.start).Round(100*time.Millisecond))
	}
}

func (b *Bar) line(s *v1alpha1.DownstreamCopySummary, now time.Time) string {
	synced, total := s.Status.SyncedCopies, s.Status.Copies
	tail := fmt.Sprintf(" %d/%d", synced, total)
	elapsed := now.Sub(b.start).Seconds()
	if rate := float64(synced-b.startCount) / elapsed; elapsed >= 1 && rate > 0 {
		tail += fmt.Sprintf(" %.1f/s ~%v left", rate, (time.Duration(float64(total-synced)/rate) * time.Second).Round(time.Second))
	}
	if s.Status.Failing > 0 {
		tail += fmt.Sprintf(" %d failing", s.Status.Failing)
	}
	if c := readyCondition(s); c.Status != metav1.ConditionTrue && c.Reason != "" {
		tail += " " + c.Reason
	}
	width := b.Width
	if width < 20 {
		width = 80
	}
	barW := min(30, width/3)
	full := 0
	if total > 0 {
		full = int(int64(barW) * int64(synced) / int64(total))
	}
	line := "[" + strings.Repeat("#", full) + strings.Repeat("-", barW-full) + "]" + tail
	// The line must never wrap: a wrapped line is not redrawn by \r.
	return line[:min(len(line), width-1)]
}
