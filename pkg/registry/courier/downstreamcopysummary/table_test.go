package downstreamcopysummary

import (
	"context"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

func TestTable(t *testing.T) {
	failing := summary("False", "10")
	failing.Status = courier.DownstreamCopySummaryStatus{Clusters: 3, ReadyClusters: 2, Copies: 6, SyncedCopies: 5, Failing: 1,
		Message:    "Forbidden(1) [Cluster ws/c3: cannot create secrets]; Pending(2) [Cluster ws/c1: waiting]",
		Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "Failing"}}}
	bundle := summary("True", "10")
	bundle.Name, bundle.Spec.Owner = "bundle:x", courier.CopyOwner{Kind: courier.OwnerKindBundle, Name: "x"}
	floored := summary("False", "10")
	floored.Status.Conditions[0].Reason = ReasonSourceChanged
	long := summary("False", "10")
	long.Status.Message = "Pending(1) [Cluster ws/c1: " + strings.Repeat("é", 100) + "]"
	noReady := summary("True", "10")
	noReady.Status.Conditions = nil

	tcs := []struct {
		name string
		obj  *courier.DownstreamCopySummary
		want []interface{} // without AGE
	}{
		{"ready", summary("True", "10"), []interface{}{"app", "HelmOp/app", "2/2", "2/2", int64(0), "Ready"}},
		{"a Bundle's", bundle, []interface{}{"bundle:x", "Bundle/x", "2/2", "2/2", int64(0), "Ready"}},
		{"failing: the head of the message", failing, []interface{}{"app", "HelmOp/app", "2/3", "5/6", int64(1), "Forbidden(1) [Cluster ws/c3: cannot create secrets]"}},
		{"floored: the reason", floored, []interface{}{"app", "HelmOp/app", "2/2", "2/2", int64(0), ReasonSourceChanged}},
		{"no condition", noReady, []interface{}{"app", "HelmOp/app", "2/2", "2/2", int64(0), "Unknown"}},
	}
	r, _ := newTestREST(summary("True", "1"), &fakeSources{})
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := r.ConvertToTable(context.Background(), tc.obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			var header []string
			for _, c := range tbl.ColumnDefinitions {
				header = append(header, strings.ToUpper(c.Name))
			}
			if got := strings.Join(header, " "); got != "NAME OWNER CLUSTERS-READY COPIES-SYNCED FAILING STATUS AGE" {
				t.Errorf("header %q", got)
			}
			if got := tbl.Rows[0].Cells[:6]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %#v, want %#v", got, tc.want)
			}
		})
	}
	t.Run("a long status is cut on a rune", func(t *testing.T) {
		got := statusCell(long)
		if len(got) > statusMax || !strings.HasSuffix(got, "é...") {
			t.Errorf("status %q (%d bytes)", got, len(got))
		}
	})
}
