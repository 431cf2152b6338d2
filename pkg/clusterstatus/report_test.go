package clusterstatus

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/internal/statusobjects"
	"github.com/courier-dev/courier/pkg/rowstatus"
)

func TestObjectName(t *testing.T) {
	short := types.NamespacedName{Namespace: "fleet-default", Name: "edge.1"}
	if got := ObjectName(short); got != "courier-agent-report.fleet-default.edge.1" {
		t.Errorf("ObjectName(%s) = %q", short, got)
	}
	long := types.NamespacedName{Namespace: "fleet-default", Name: strings.Repeat("c", 240)}
	got := ObjectName(long)
	if len(got) > 253 || !strings.HasPrefix(got, namePrefix) || len(validation.IsDNS1123Subdomain(got)) != 0 {
		t.Errorf("ObjectName of a long name = %q (%d chars), want a valid hashed name", got, len(got))
	}
	other := types.NamespacedName{Namespace: "fleet-default", Name: strings.Repeat("c", 239) + "d"}
	if ObjectName(other) == got {
		t.Error("two long Cluster names share a report name")
	}
}

func TestDecodeRefusesAnotherClustersName(t *testing.T) {
	c := types.NamespacedName{Namespace: "ws", Name: "edge1"}
	cm := newObject("courier-system", c, map[string]string{"row": `{"phase":"Synced"}`})
	if r, ok := decode(cm); !ok || r.Rows["row"].Phase != courier.CopyPhaseSynced {
		t.Fatalf("decode = %+v, %v", r, ok)
	}
	cm.Annotations[AnnotationCluster] = "edge2"
	if _, ok := decode(cm); ok {
		t.Error("a report whose name is not its annotated Cluster's was read")
	}
}

func TestFromStatusUpdate(t *testing.T) {
	synced := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	row := func(phase courier.CopyPhase, interval *string, mutate func(*courier.DownstreamCopy)) *courier.DownstreamCopy {
		r := &courier.DownstreamCopy{
			ObjectMeta: metav1.ObjectMeta{Name: "app.edge1.secret.db", Namespace: "ws"},
			Spec:       courier.DownstreamCopySpec{Cluster: "edge1"},
			Status:     courier.DownstreamCopyStatus{Phase: phase, Message: "ok", SyncedResourceVersion: "42", LastSyncTime: &synced},
		}
		if interval != nil {
			r.Annotations = map[string]string{courier.AnnotationReportInterval: *interval}
		}
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name         string
		in           *courier.DownstreamCopy
		wantInterval time.Duration
		wantErr      string
		wantMessage  string
	}{
		{name: "synced with interval", in: row(courier.CopyPhaseSynced, s("2s"), nil), wantInterval: 2 * time.Second, wantMessage: "ok"},
		{name: "no annotation: the default", in: row(courier.CopyPhaseForbidden, nil, nil), wantInterval: rowstatus.DefaultInterval, wantMessage: "ok"},
		{name: "unknown phase", in: row("Exploded", s("30s"), nil), wantErr: `status.phase: Unsupported value: "Exploded"`},
		{name: "empty phase", in: row("", s("30s"), nil), wantErr: `status.phase: Unsupported value: ""`},
		{name: "interval not a duration", in: row(courier.CopyPhaseSynced, s("soon"), nil), wantErr: "must be a Go duration"},
		{name: "interval too short", in: row(courier.CopyPhaseSynced, s("10ms"), nil), wantErr: "must be between 1s and 1h0m0s"},
		{name: "interval too long", in: row(courier.CopyPhaseSynced, s("3h"), nil), wantErr: "must be between 1s and 1h0m0s"},
		{name: "resourceVersion too long", in: row(courier.CopyPhaseSynced, nil, func(r *courier.DownstreamCopy) {
			r.Status.SyncedResourceVersion = strings.Repeat("9", 200)
		}), wantErr: "status.syncedResourceVersion: Too long"},
		{name: "long message cut", in: row(courier.CopyPhaseConflict, nil, func(r *courier.DownstreamCopy) {
			r.Status.Message = strings.Repeat("é", 2000)
		}), wantInterval: rowstatus.DefaultInterval, wantMessage: strings.Repeat("é", (MaxMessageBytes-3)/2) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, interval, errs := FromStatusUpdate(tc.in)
			if tc.wantErr != "" {
				if !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
					t.Fatalf("errors %v, want %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) != 0 {
				t.Fatalf("unexpected errors: %v", errs)
			}
			if interval != tc.wantInterval || e.Phase != tc.in.Status.Phase || e.Message != tc.wantMessage ||
				e.SyncedResourceVersion != tc.in.Status.SyncedResourceVersion || !e.LastSyncTime.Equal(&synced) {
				t.Errorf("got %+v every %s", e, interval)
			}
			if len(e.Message) > MaxMessageBytes {
				t.Errorf("message of %d bytes", len(e.Message))
			}
		})
	}
}

func TestEncodeShortensMessagesToFit(t *testing.T) {
	r := &Report{Cluster: types.NamespacedName{Namespace: "ws", Name: "edge1"}, Rows: map[string]Entry{}}
	for i := range 1500 {
		r.Rows[fmt.Sprintf("app.edge1.secret.s%04d", i)] = Entry{Phase: courier.CopyPhaseForbidden, Message: strings.Repeat("m", MaxMessageBytes)}
	}
	data, err := encode(r)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > statusobjects.MaxDataBytes || len(data) != 1500 {
		t.Errorf("%d entries of %d bytes in all, want 1500 within %d", len(data), size, statusobjects.MaxDataBytes)
	}
	for i := range 20000 {
		r.Rows[fmt.Sprintf("app.edge1.secret.%0200d", i)] = Entry{Phase: courier.CopyPhaseSynced}
	}
	if _, err := encode(r); err == nil || !strings.Contains(err.Error(), "would exceed") {
		t.Errorf("an oversized report: %v, want an error saying it would exceed the bound", err)
	}
}

func TestDeadline(t *testing.T) {
	heard := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := &Report{Heartbeat: Heartbeat{LastHeard: metav1.NewMicroTime(heard), Interval: metav1.Duration{Duration: 2 * time.Second}}}
	if got := r.Deadline(); !got.Equal(heard.Add(6 * time.Second)) {
		t.Errorf("Deadline = %s", got)
	}
	if !(&Report{}).Deadline().IsZero() {
		t.Error("a report without a heartbeat has a deadline")
	}
}
