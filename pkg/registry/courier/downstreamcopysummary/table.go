package downstreamcopysummary

import (
	"fmt"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// columns are the Table columns of downstreamcopysummaries.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Owner", Type: "string", Description: "The HelmOp or Bundle whose downstreamResources are summed up: HelmOp/<name> or Bundle/<name>."},
	{Name: "Clusters-Ready", Type: "string", Description: "Clusters with every copy synced at its source's current resourceVersion, of the Clusters targeted."},
	{Name: "Copies-Synced", Type: "string", Description: "Copies synced at their source's current resourceVersion, of the copies wanted."},
	{Name: "Failing", Type: "integer", Description: "Copies in a phase someone must act on: Forbidden, Conflict, Denied, Invalid, Unreachable or SourceMissing."},
	{Name: "Status", Type: "string", Description: "Ready, or what is not ready: the first group of the message, or the Ready condition's reason."},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// statusMax is the most bytes the Status column shows.
const statusMax = 80

// cells returns one row's cells, in columns order.
func cells(o *courier.DownstreamCopySummary, name, age string) []interface{} {
	st := o.Status
	return []interface{}{
		name,
		string(o.Spec.Owner.Kind) + "/" + o.Spec.Owner.Name,
		fmt.Sprintf("%d/%d", st.ReadyClusters, st.Clusters),
		fmt.Sprintf("%d/%d", st.SyncedCopies, st.Copies),
		int64(st.Failing),
		statusCell(o),
		age,
	}
}

// statusCell is Ready when the Ready condition is True; otherwise the head
// of the message (its first phase group), or the condition's reason when
// the message is empty or the condition was floored by a source change.
func statusCell(o *courier.DownstreamCopySummary) string {
	ready := readyOf(o)
	switch {
	case ready.Status == metav1.ConditionTrue:
		return "Ready"
	case ready.Reason == ReasonSourceChanged || ready.Reason == ReasonSourceUnknown || o.Status.Message == "":
		if ready.Reason == "" {
			return "Unknown"
		}
		return ready.Reason
	}
	head, _, _ := strings.Cut(o.Status.Message, "]; ")
	if len(head) < len(o.Status.Message) {
		head += "]"
	}
	if len(head) > statusMax {
		for len(head) > statusMax-3 {
			_, size := utf8.DecodeLastRuneInString(head)
			head = head[:len(head)-size]
		}
		head += "..."
	}
	return head
}
