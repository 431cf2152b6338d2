package fieldcopy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/memstore"
)

// A rule whose path is 5,000 levels deep (the chaos catalogue's) is
// Invalid, saying so, and nothing is written for it: before, Courier wrote
// the object and the API server answered 400 BadRequest. Beside it, a rule
// that does write (the positive control: the same sync writes). The sync
// is called directly, with no informers, queue or waiting.
func TestDeepPathsAreInvalidBeforeAnyWrite(t *testing.T) {
	deep := "spec.template." + strings.Repeat("a.", 5000) + "a"
	cases := []struct {
		name    string
		rules   string
		updates int
		rows    []string // "phase: message", sorted
	}{
		{
			name:  "destination 5,000 levels deep",
			rules: `[{"to":"` + deep + `","from":"json:\"x\""}]`,
			rows:  []string{"Invalid: courier.dev/field-copies[0]: destination: path has 5003 segments; at most 100"},
		},
		{
			name:  "source path 5,000 levels deep",
			rules: `[{"to":"spec.template.x","from":"secret:src:` + deep + `"}]`,
			rows:  []string{"Invalid: courier.dev/field-copies[0]: SRC-PATH: path has 5003 segments; at most 100"},
		},
		{
			name:    "beside a rule that writes",
			rules:   `[{"to":"` + deep + `","from":"json:\"x\""},{"to":"spec.template.x","from":"json:\"y\""}]`,
			updates: 1,
			rows: []string{
				"Applied: spec.template.x holds the JSON literal",
				"Invalid: courier.dev/field-copies[0]: destination: path has 5003 segments; at most 100",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := fed("ns1", "fs", map[string]string{"courier.dev/field-copies": tc.rules}, map[string]any{})
			target.SetResourceVersion("1")
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{secretsGVR: "SecretList", fedGVR: "FederatedSecretList"}, target.DeepCopy())
			var written []*unstructured.Unstructured
			client.PrependReactor("update", "federatedsecrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
				written = append(written, a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured))
				return false, nil, nil
			})
			store := memstore.New[*courier.FieldCopy]()
			c := NewController(Config{Dynamic: client, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
				Resolver: fakeResolver{}, Store: store, Targets: []string{"federatedsecrets"}})
			if _, err := c.sync(context.Background(), objectKey{GVR: fedGVR, Namespace: "ns1", Name: "fs"}, target, true); err != nil {
				t.Fatal(err)
			}
			if len(written) != tc.updates {
				t.Errorf("%d writes, want %d", len(written), tc.updates)
			}
			for _, w := range written {
				if _, found, _ := unstructured.NestedFieldNoCopy(w.Object, "spec", "template", "a"); found {
					t.Errorf("the deep destination was written: spec.template.a is set")
				}
			}
			items, _ := store.List("", nil)
			var rows []string
			for _, r := range items {
				rows = append(rows, fmt.Sprintf("%s: %s", r.Status.Phase, r.Status.Message))
			}
			slices.Sort(rows)
			if !slices.Equal(rows, tc.rows) {
				t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(tc.rows, "\n"))
			}
		})
	}
}

// Only the leader records Warning Events: a follower computes the same
// Invalid row (the positive control that it saw the problem) and records
// nothing, so two replicas do not record each problem twice.
func TestOnlyTheLeaderRecordsEvents(t *testing.T) {
	for _, tc := range []struct {
		name     string
		follower bool
		events   int
	}{
		{"leader", false, 1},
		{"follower", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := fed("ns1", "fs", map[string]string{"courier.dev/field-copies": "not a JSON list"}, map[string]any{})
			target.SetResourceVersion("1")
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{secretsGVR: "SecretList", fedGVR: "FederatedSecretList"}, target.DeepCopy())
			store := memstore.New[*courier.FieldCopy]()
			recorder := record.NewFakeRecorder(10)
			c := NewController(Config{Dynamic: client, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
				Resolver: fakeResolver{}, Store: store, Targets: []string{"federatedsecrets"}, Recorder: recorder, Follower: tc.follower})
			if _, err := c.sync(context.Background(), objectKey{GVR: fedGVR, Namespace: "ns1", Name: "fs"}, target, true); err != nil {
				t.Fatal(err)
			}
			items, _ := store.List("", nil)
			if len(items) != 1 || items[0].Status.Phase != courier.FieldCopyPhaseInvalid {
				t.Fatalf("rows %+v, want one Invalid row", items)
			}
			close(recorder.Events)
			var got []string
			for e := range recorder.Events {
				got = append(got, e)
			}
			if len(got) != tc.events || (tc.events > 0 && !strings.HasPrefix(got[0], "Warning FieldCopyInvalid ")) {
				t.Errorf("events %q, want %d Warning FieldCopyInvalid", got, tc.events)
			}
		})
	}
}
