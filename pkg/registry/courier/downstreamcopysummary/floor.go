package downstreamcopysummary

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copysummary"
)

// SourceVersions reads the current resourceVersion of a source upstream,
// metadata only: never its data. kind is Secret or ConfigMap, in any case.
type SourceVersions interface {
	SourceVersion(ctx context.Context, namespace, kind, name string) (rv string, exists bool, err error)
}

// The reasons of a Ready condition the floor sets.
const (
	// ReasonSourceChanged: a source is newer upstream than the version the
	// summary was computed at.
	ReasonSourceChanged = "SourceChanged"
	// ReasonSourceUnknown: a source's current version could not be read,
	// so the summary cannot say it is Ready.
	ReasonSourceUnknown = "SourceUnknown"
)

// maxNamed is the most sources a floored condition's message names.
const maxNamed = 5

// floor makes a summary read by name reflect its sources' resourceVersions
// as of the request, as the kube-apiserver's consistent reads from cache
// (KEP-2340) wait for the cache to reach the current revision. The
// summaries are computed from rows the view updates after its informers see
// a source change, so right after a write a summary may still show every
// copy synced at the old version. The floor reads each source's current
// resourceVersion live, once per request (once per watch, or when an event
// first names a source), and whenever the summary shows a source at an
// older one, its Ready condition is False (SourceChanged), whatever the
// rows say. A source it could not read makes a Ready=True summary Unknown.
// So a `kubectl wait --for=condition=Ready` started after a source write
// never returns on a summary computed before the view saw that write.
type floor struct {
	sources SourceVersions
	now     func() metav1.Time
	live    map[liveKey]liveRV
}

type liveKey struct{ namespace, kind, name string }

type liveRV struct {
	rv     string
	exists bool
}

func (r *REST) newFloor() *floor {
	return &floor{sources: r.sources, now: r.now, live: map[liveKey]liveRV{}}
}

// read returns a source's live resourceVersion, read once per floor (a
// failed read is tried again next time).
func (f *floor) read(ctx context.Context, namespace, kind, name string) (liveRV, error) {
	k := liveKey{namespace, strings.ToLower(kind), name}
	if v, ok := f.live[k]; ok {
		return v, nil
	}
	rv, exists, err := f.sources.SourceVersion(ctx, namespace, kind, name)
	if err != nil {
		return liveRV{}, err
	}
	v := liveRV{rv: rv, exists: exists}
	f.live[k] = v
	return v, nil
}

// readAll reads the sources s names now.
func (f *floor) readAll(ctx context.Context, s *courier.DownstreamCopySummary) {
	for _, src := range s.Status.Sources {
		_, _ = f.read(ctx, s.Namespace, src.Kind, src.Name)
	}
}

// apply sets s's Ready condition to False when a source is newer upstream
// than in s, and a True one to Unknown when a source could not be read.
func (f *floor) apply(ctx context.Context, s *courier.DownstreamCopySummary) {
	var changed, unread []string
	for _, src := range s.Status.Sources {
		live, err := f.read(ctx, s.Namespace, src.Kind, src.Name)
		switch {
		case err != nil:
			unread = append(unread, fmt.Sprintf("%s %s: %v", src.Kind, src.Name, err))
		case behind(src.ResourceVersion, live):
			changed = append(changed, describe(src, live))
		}
	}
	ready := readyOf(s)
	switch {
	case len(changed) > 0:
		msg := "changed upstream since the copies were summed: " + join(changed)
		if ready.Message != "" {
			msg += "; before that: " + ready.Message
		}
		f.set(s, ready, metav1.ConditionFalse, ReasonSourceChanged, msg)
	case len(unread) > 0 && ready.Status == metav1.ConditionTrue:
		f.set(s, ready, metav1.ConditionUnknown, ReasonSourceUnknown, "cannot tell whether the sources changed: "+join(unread))
	}
}

// behind says whether a summary that shows a source at rv is older than
// the source's live state: a version it cannot compare counts as older
// when it differs; a source created or deleted since counts too.
func behind(rv string, live liveRV) bool {
	switch {
	case !live.exists:
		return rv != ""
	case rv == "":
		return true
	}
	return copysummary.CompareRV(rv, live.rv) < 0
}

func describe(src courier.SummarySource, live liveRV) string {
	switch {
	case !live.exists:
		return fmt.Sprintf("%s %s was deleted (summed at resourceVersion %s)", src.Kind, src.Name, src.ResourceVersion)
	case src.ResourceVersion == "":
		return fmt.Sprintf("%s %s exists at resourceVersion %s (summed as missing)", src.Kind, src.Name, live.rv)
	}
	return fmt.Sprintf("%s %s is at resourceVersion %s (summed at %s)", src.Kind, src.Name, live.rv, src.ResourceVersion)
}

func join(items []string) string {
	if len(items) > maxNamed {
		return strings.Join(items[:maxNamed], "; ") + fmt.Sprintf("; and %d more", len(items)-maxNamed)
	}
	return strings.Join(items, "; ")
}

// readyOf returns s's Ready condition (zero when it has none).
func readyOf(s *courier.DownstreamCopySummary) metav1.Condition {
	for _, c := range s.Status.Conditions {
		if c.Type == courier.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}

// set replaces s's Ready condition.
func (f *floor) set(s *courier.DownstreamCopySummary, prev metav1.Condition, status metav1.ConditionStatus, reason, msg string) {
	c := metav1.Condition{Type: courier.ConditionReady, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: prev.ObservedGeneration, LastTransitionTime: prev.LastTransitionTime}
	if prev.Status != status || c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = f.now()
	}
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == courier.ConditionReady {
			s.Status.Conditions[i] = c
			return
		}
	}
	s.Status.Conditions = append(s.Status.Conditions, c)
}
