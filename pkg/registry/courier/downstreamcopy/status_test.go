package downstreamcopy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/clusterstatus"
	"github.com/courier-dev/courier/pkg/memstore"
)

// recorded is one Record call.
type recorded struct {
	cluster  types.NamespacedName
	row      string
	entry    clusterstatus.Entry
	interval time.Duration
}

type fakeReporter struct {
	calls []recorded
	err   error
}

func (f *fakeReporter) Record(_ context.Context, c types.NamespacedName, row string, e clusterstatus.Entry, interval time.Duration) error {
	f.calls = append(f.calls, recorded{c, row, e, interval})
	return f.err
}

// Holds: the last call for the row said e.
func (f *fakeReporter) Holds(c types.NamespacedName, row string, e clusterstatus.Entry) bool {
	for i := len(f.calls) - 1; i >= 0; i-- {
		if f.calls[i].cluster == c && f.calls[i].row == row {
			return f.calls[i].entry.Phase == e.Phase && f.calls[i].entry.Message == e.Message
		}
	}
	return false
}

// fakeNotes keeps the notes it is told, as "<row> <note>".
type fakeNotes struct{ noted []string }

func (f *fakeNotes) Noted(row *courier.DownstreamCopy, note string) {
	f.noted = append(f.noted, row.Name+" "+note)
}

func newStatusREST(reports Reporter) *StatusREST {
	return newStatusRESTWithNotes(reports, nil)
}

func newStatusRESTWithNotes(reports Reporter, notes DeniedNotes) *StatusREST {
	store := memstore.New[*courier.DownstreamCopy]()
	store.Replace([]*courier.DownstreamCopy{
		payloadRow("app.edge1.secret.s", "edge1", "Secret", "s", courier.CopyPhasePending, false),
		payloadRow("app.edge2.secret.s", "edge2", "Secret", "s", courier.CopyPhasePending, false),
		undelivered(payloadRow("app.edge1.secret.k", "edge1", "Secret", "k", courier.CopyPhaseDenied, true)),
	})
	return NewStatusREST(store, fakeAgents{}, reports, notes)
}

// report is the body an agent sends.
func report(name string, phase courier.CopyPhase, interval string) rest.UpdatedObjectInfo {
	obj := &courier.DownstreamCopy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, ResourceVersion: "1"},
		// A report cannot change the spec: it is ignored.
		Spec:   courier.DownstreamCopySpec{Cluster: "edge2", HelmOp: "other"},
		Status: courier.DownstreamCopyStatus{Phase: phase, Message: "copied", SyncedResourceVersion: "71"},
	}
	if interval != "" {
		obj.Annotations = map[string]string{courier.AnnotationReportInterval: interval}
	}
	return rest.DefaultUpdatedObjectInfo(obj)
}

func TestStatusUpdate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		user       string
		row        string
		body       rest.UpdatedObjectInfo
		reportErr  error
		wantCode   int32
		wantInErr  string
		wantRecord *recorded
	}{
		{name: "the agent reports its row", user: "agent-edge1", row: "app.edge1.secret.s", body: report("app.edge1.secret.s", courier.CopyPhaseSynced, "2s"),
			wantRecord: &recorded{types.NamespacedName{Namespace: "fleet-default", Name: "edge1"}, "app.edge1.secret.s",
				clusterstatus.Entry{Phase: courier.CopyPhaseSynced, Message: "copied", SyncedResourceVersion: "71"}, 2 * time.Second}},
		{name: "no interval: 30s", user: "agent-edge1", row: "app.edge1.secret.s", body: report("app.edge1.secret.s", courier.CopyPhaseForbidden, ""),
			wantRecord: &recorded{types.NamespacedName{Namespace: "fleet-default", Name: "edge1"}, "app.edge1.secret.s",
				clusterstatus.Entry{Phase: courier.CopyPhaseForbidden, Message: "copied", SyncedResourceVersion: "71"}, 30 * time.Second}},
		{name: "another Cluster's row", user: "agent-edge1", row: "app.edge2.secret.s", body: report("app.edge2.secret.s", courier.CopyPhaseSynced, "2s"),
			wantCode: 403, wantInErr: "only by the courier-agent of its Cluster fleet-default/edge2"},
		{name: "a cluster-admin", user: "admin", row: "app.edge1.secret.s", body: report("app.edge1.secret.s", courier.CopyPhaseSynced, "2s"),
			wantCode: 403, wantInErr: "only by the courier-agent"},
		{name: "no such row", user: "agent-edge1", row: "app.edge1.secret.none", body: report("app.edge1.secret.none", courier.CopyPhaseSynced, "2s"),
			wantCode: 404},
		{name: "Denied on a row the view did not deny", user: "agent-edge1", row: "app.edge1.secret.s", body: report("app.edge1.secret.s", courier.CopyPhaseDenied, "2s"),
			wantCode: 422, wantInErr: "Denied is reported only with a note on a row Courier's view made Denied"},
		{name: "a note on a Denied row", user: "agent-edge1", row: "app.edge1.secret.k", body: report("app.edge1.secret.k", courier.CopyPhaseDenied, "2s"),
			wantRecord: &recorded{types.NamespacedName{Namespace: "fleet-default", Name: "edge1"}, "app.edge1.secret.k",
				clusterstatus.Entry{Phase: courier.CopyPhaseDenied, Message: "copied", SyncedResourceVersion: "71"}, 2 * time.Second}},
		{name: "unknown phase", user: "agent-edge1", row: "app.edge1.secret.s", body: report("app.edge1.secret.s", "Done", "2s"),
			wantCode: 422, wantInErr: "status.phase"},
		{name: "bad interval", user: "agent-edge1", row: "app.edge1.secret.s", body: report("app.edge1.secret.s", courier.CopyPhaseSynced, "often"),
			wantCode: 422, wantInErr: "courier.dev/report-interval"},
		{name: "the store fails", user: "agent-edge1", row: "app.edge1.secret.s", body: report("app.edge1.secret.s", courier.CopyPhaseSynced, "2s"),
			reportErr: errors.New("etcd is on fire"), wantCode: 500, wantInErr: "keeping the report of Cluster fleet-default/edge1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &fakeReporter{err: tc.reportErr}
			r := newStatusREST(rep)
			obj, created, err := r.Update(asUser(tc.user), tc.row, tc.body, nil, nil, false, &metav1.UpdateOptions{})
			if tc.wantCode != 0 {
				var st apierrors.APIStatus
				if !errors.As(err, &st) || st.Status().Code != tc.wantCode || !strings.Contains(err.Error(), tc.wantInErr) {
					t.Fatalf("error %v, want %d containing %q", err, tc.wantCode, tc.wantInErr)
				}
				if tc.reportErr == nil && len(rep.calls) != 0 {
					t.Errorf("a refused report was recorded: %+v", rep.calls)
				}
				return
			}
			if err != nil || created {
				t.Fatalf("Update: %v (created %v)", err, created)
			}
			if len(rep.calls) != 1 || rep.calls[0].cluster != tc.wantRecord.cluster || rep.calls[0].row != tc.wantRecord.row ||
				rep.calls[0].interval != tc.wantRecord.interval || rep.calls[0].entry.Phase != tc.wantRecord.entry.Phase ||
				rep.calls[0].entry.Message != tc.wantRecord.entry.Message || rep.calls[0].entry.SyncedResourceVersion != "71" {
				t.Fatalf("recorded %+v, want %+v", rep.calls, tc.wantRecord)
			}
			row := obj.(*courier.DownstreamCopy)
			if row.Spec.Cluster != "edge1" || row.Status.Phase != tc.wantRecord.entry.Phase {
				t.Errorf("returned spec %+v status %+v: the spec must stay the row's", row.Spec, row.Status)
			}
		})
	}
}

func TestStatusUpdateIsUpdateOnly(t *testing.T) {
	var storage rest.Storage = newStatusREST(&fakeReporter{})
	if _, ok := storage.(rest.Getter); ok {
		t.Error("the status subresource serves get, and so patch")
	}
	if _, ok := storage.(rest.Patcher); ok {
		t.Error("the status subresource serves patch")
	}
}

// An agent's new note on a Denied row is told once (the replica that
// keeps the report records the Event); the same note again, or a report
// of any other row, is not.
func TestStatusUpdateTellsNewNotes(t *testing.T) {
	rep, notes := &fakeReporter{}, &fakeNotes{}
	r := newStatusRESTWithNotes(rep, notes)
	send := func(row string, phase courier.CopyPhase) {
		t.Helper()
		if _, _, err := r.Update(asUser("agent-edge1"), row, report(row, phase, "2s"), nil, nil, false, &metav1.UpdateOptions{}); err != nil {
			t.Fatalf("Update %s: %v", row, err)
		}
	}
	send("app.edge1.secret.s", courier.CopyPhaseSynced) // the positive control's neighbour: no note
	send("app.edge1.secret.k", courier.CopyPhaseDenied)
	send("app.edge1.secret.k", courier.CopyPhaseDenied)
	if want := []string{"app.edge1.secret.k copied"}; !slices.Equal(notes.noted, want) {
		t.Errorf("noted %q, want %q", notes.noted, want)
	}
	if len(rep.calls) != 3 {
		t.Errorf("%d reports recorded, want 3", len(rep.calls))
	}
}
