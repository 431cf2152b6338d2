package copyview

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	fleet "github.com/courier-dev/courier/pkg/apis/fleet/v1alpha1"
)

// recorded returns the Events the fake recorder holds, without waiting:
// the controller records them before its sync returns.
func recorded(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A targeting problem has no row to show it on, so it is recorded as a
// Warning Event on the HelmOp, once: the HelmOp is synced twice and each
// case says every Event recorded over both syncs. The valid target records
// none and has its row (the negative case's positive control: the same
// fixture records the bad ones).
func TestTargetProblemsRecordOneWarningEvent(t *testing.T) {
	const ref = " involvedObject{kind=HelmOp,apiVersion=fleet.cattle.io/v1alpha1}"
	valid := fleet.BundleTarget{ClusterName: "c1"}
	badOperator := fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Foo", Values: []string{"dev"}}}}}
	badGroup := &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "bad-group"},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists, Values: []string{"x"}}}}},
	}
	cases := []struct {
		name    string
		targets []fleet.BundleTarget
		extra   []any
		want    []string
		rows    int
	}{
		{name: "a valid target", targets: []fleet.BundleTarget{valid}, rows: 1},
		{
			name: "a clusterSelector that does not parse, beside a valid target", targets: []fleet.BundleTarget{badOperator, valid}, rows: 1,
			want: []string{`Warning InvalidTarget target "target000": invalid clusterSelector: "Foo" is not a valid label selector operator; the target matches no cluster` + ref},
		},
		{
			name: "a clusterGroupSelector that does not parse, in a named target",
			targets: []fleet.BundleTarget{{Name: "edge", ClusterGroupSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a b", Operator: metav1.LabelSelectorOpExists}}}}},
			want: []string{`Warning InvalidTarget target "edge": invalid clusterGroupSelector: key: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'); the target matches no cluster` + ref},
		},
		{
			name: "a ClusterGroup whose selector does not parse", targets: []fleet.BundleTarget{{ClusterGroup: "bad-group"}, valid}, extra: []any{badGroup}, rows: 1,
			want: []string{`Warning InvalidTarget target "target000": ClusterGroup "bad-group": invalid spec.selector: values: Invalid value: ["x"]: values set must be empty for exists and does not exist; the target matches no cluster` + ref},
		},
		{
			name: "a target without criteria", targets: []fleet.BundleTarget{{Name: "empty"}, valid}, rows: 1,
			want: []string{`Warning TargetWithoutCriteria target "empty": sets none of clusterName, clusterSelector, clusterGroup, clusterGroupSelector, so it matches no cluster` + ref},
		},
		{
			name: "two bad targets: one Event each", targets: []fleet.BundleTarget{badOperator, {Name: "empty"}},
			want: []string{
				`Warning InvalidTarget target "target000": invalid clusterSelector: "Foo" is not a valid label selector operator; the target matches no cluster` + ref,
				`Warning TargetWithoutCriteria target "empty": sets none of clusterName, clusterSelector, clusterGroup, clusterGroupSelector, so it matches no cluster` + ref,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			rec.IncludeObject = true
			objs := append([]any{helmOp("app", listing("Secret/creds"), tc.targets...), cluster("c1", nil), defaultGroup, source("Secret", "creds", "1")}, tc.extra...)
			f := newRecordingFixture(t, Events{Recorder: rec}, objs...)
			f.c.enqueue(appOp) // the second sync: the problems are the same
			f.drain()
			set := fmt.Sprintf("set fleet-default/app %d", tc.rows)
			if calls := f.engine.takeCalls(); !slices.Equal(calls, []string{"complete", set, set}) {
				t.Fatalf("engine calls %q, want two syncs of app with %d rows", calls, tc.rows)
			}
			if got := recorded(rec); !slices.Equal(got, tc.want) {
				t.Errorf("Events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A problem that goes away and comes back is reported again; a long
// selector error is cut to fit an Event; without a recorder a problem is
// only logged.
func TestTargetProblemEventsOverTime(t *testing.T) {
	bad := helmOp("app", listing("Secret/creds"), fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Foo"}}}})
	good := helmOp("app", listing("Secret/creds"), fleet.BundleTarget{ClusterName: "c1"})
	long := helmOp("app", listing("Secret/creds"), fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"env": strings.Repeat("v", 5000)}}})
	rec := record.NewFakeRecorder(10)
	f := newRecordingFixture(t, Events{Recorder: rec}, bad, cluster("c1", nil), defaultGroup, source("Secret", "creds", "1"))
	const badEvent = `Warning InvalidTarget target "target000": invalid clusterSelector: "Foo" is not a valid label selector operator; the target matches no cluster`
	if got := recorded(rec); !slices.Equal(got, []string{badEvent}) {
		t.Fatalf("first sync: Events %q, want %q", got, badEvent)
	}
	f.update(bad, good)
	f.drain()
	if got := recorded(rec); len(got) != 0 {
		t.Errorf("after the fix: Events %q, want none", got)
	}
	if _, ok := f.rows()["app.c1.secret.creds"]; !ok {
		t.Fatalf("after the fix: no row for c1: the HelmOp was not synced, rows %v", f.rows())
	}
	f.update(good, bad)
	f.drain()
	if got := recorded(rec); !slices.Equal(got, []string{badEvent}) {
		t.Errorf("the problem back: Events %q, want %q", got, badEvent)
	}

	f.update(bad, long)
	f.drain()
	got := recorded(rec)
	if len(got) != 1 || !strings.HasPrefix(got[0], `Warning InvalidTarget target "target000": invalid clusterSelector: values[0][env]: Invalid value: "vvv`) {
		t.Fatalf("a long value: Events %q, want one InvalidTarget", got)
	}
	if msg := strings.TrimPrefix(got[0], "Warning InvalidTarget "); len(msg) != maxEventMessage || !strings.HasSuffix(msg, "...") {
		t.Errorf("a long value: message of %d bytes ending %q, want %d bytes ending \"...\"", len(msg), msg[len(msg)-10:], maxEventMessage)
	}

	// No recorder: the problem is still found (and logged), nothing panics.
	f.c.recorder = nil
	f.update(long, bad)
	f.drain()
	if f.c.rows[appOp] == nil || !f.c.rows[appOp].problems[`target "target000": invalid clusterSelector: "Foo" is not a valid label selector operator`] {
		t.Errorf("without a recorder the problem was not recorded as reported: %+v", f.c.rows[appOp])
	}
}

// Only the leader records the Events (every replica runs the view and
// logs): a follower records none; once it leads it records the problems
// it has not recorded itself, syncing only the HelmOps that have such
// problems, and leading again after a loss records nothing twice.
func TestTargetProblemEventsOnlyFromTheLeader(t *testing.T) {
	bad := helmOp("app", listing("Secret/creds"), fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Foo"}}}})
	good := helmOp("web", listing("Secret/creds"), fleet.BundleTarget{ClusterName: "c1"})
	rec := record.NewFakeRecorder(10)
	f := newRecordingFixture(t, Events{Recorder: rec, Follower: true}, bad, good, cluster("c1", nil), defaultGroup, source("Secret", "creds", "1"))
	f.c.enqueue(appOp)
	f.drain()
	if got := recorded(rec); len(got) != 0 {
		t.Errorf("a follower recorded Events %q", got)
	}
	if st := f.c.rows[appOp]; st == nil || len(st.problems) != 1 {
		t.Fatalf("the follower did not find app's problem (%+v): no Event proves nothing", st)
	}
	f.engine.takeCalls()

	f.c.SetLeading(true)
	f.drain()
	const badEvent = `Warning InvalidTarget target "target000": invalid clusterSelector: "Foo" is not a valid label selector operator; the target matches no cluster`
	if got := recorded(rec); !slices.Equal(got, []string{badEvent}) {
		t.Errorf("after taking the lead: Events %q, want %q", got, badEvent)
	}
	if calls := f.engine.takeCalls(); !slices.Equal(calls, []string{"set fleet-default/app 0"}) {
		t.Errorf("taking the lead synced %q, want app only", calls)
	}

	f.c.SetLeading(false)
	f.c.SetLeading(true)
	f.c.enqueue(appOp)
	f.drain()
	if got := recorded(rec); len(got) != 0 {
		t.Errorf("leading again: Events %q, want none (recorded already)", got)
	}
}
