package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"

	"github.com/courier-dev/courier/pkg/apis/courier"
	"github.com/courier-dev/courier/pkg/copycontract"
	"github.com/courier-dev/courier/pkg/copyspec"
	"github.com/courier-dev/courier/pkg/downstream"
)

// syncedAt is the LastSyncTime of a copy written at fixedNow.
var syncedAt = &metav1.Time{Time: fixedNow.Truncate(time.Second)}

const syncedMessage = "the copy matches its source"

// saLookup is the engine's check for the fallback
// ServiceAccount that writes for HelmOps naming none. The fake clusters
// have none, so copies are written with Courier's own identity.
const saLookup = "get serviceaccounts cattle-fleet-system/fleet-default"

func checkStatus(t *testing.T, what string, got, want copycontract.Status) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("status of %s:\n got %+v\nwant %+v", what, got, want)
	}
}

func checkActions(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s requests:\n got %q\nwant %q", what, got, want)
	}
}

func checkReachable(t *testing.T, want float64) {
	t.Helper()
	got, err := testutil.GetGaugeMetricValue(clusterReachable.WithLabelValues(clusterKey))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("courier_cluster_reachable{cluster=%q} = %v, want %v", clusterKey, got, want)
	}
}

// rowOf is the Pending row for a source.
func rowOf(src runtime.Object) *courier.DownstreamCopy {
	m, _ := meta.Accessor(src)
	return row(kindOf(src), m.GetName(), m.GetResourceVersion(), courier.CopyPhasePending)
}

func gvrOf(obj runtime.Object) schema.GroupVersionResource {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return configMapsGVR
	}
	return secretsGVR
}

func kindOf(obj runtime.Object) string {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return "ConfigMap"
	}
	return "Secret"
}

var targetNamespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: targetNS}}

// A copy that does not exist downstream is created (after its
// namespace, if that is missing too) with Courier's labels and annotations.
func TestReconcileCreatesCopy(t *testing.T) {
	cases := []struct {
		name     string
		synced   bool
		existing []runtime.Object
		keep     bool
		wantDown []string
	}{
		{
			name:     "namespace missing",
			synced:   true,
			wantDown: []string{"get secrets apps/db", saLookup, "create namespaces apps", "create secrets apps/db"},
		},
		{
			name:     "namespace exists",
			synced:   true,
			existing: []runtime.Object{targetNamespace},
			wantDown: []string{"get secrets apps/db", saLookup, "create namespaces apps", "create secrets apps/db"},
		},
		{
			name:     "keepResources",
			synced:   true,
			existing: []runtime.Object{targetNamespace},
			keep:     true,
			wantDown: []string{"get secrets apps/db", saLookup, "create namespaces apps", "create secrets apps/db"},
		},
		{
			name:     "informers not synced: the sweep lists live, by label",
			wantDown: []string{"get secrets apps/db", saLookup, "create namespaces apps", "create secrets apps/db", "list secrets " + c1Selector, "list configmaps " + c1Selector},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := srcSecret("db", "7")
			src.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
			down := newFakeCluster(tc.synced, tc.existing...)
			env := newEnv(t, down, src)
			r := row("Secret", "db", "7", courier.CopyPhasePending)
			r.Spec.KeepResources = tc.keep

			if err := env.reconcile(r); err != nil {
				t.Fatalf("reconcile: %v", err)
			}

			checkActions(t, "downstream", env.downActions(), tc.wantDown)
			checkActions(t, "upstream", env.upActions(), []string{"get secrets fleet-default/db"})
			got, ok := down.secret(targetNS, "db")
			if !ok {
				t.Fatal("the copy was not created")
			}
			wantLabels := map[string]string{
				"app.kubernetes.io/name":   "db",
				"courier.dev/managed-by":   "courier",
				"courier.dev/owner":        appOwnerHash,
				"courier.dev/cluster-hash": c1ClusterHash,
			}
			wantAnnotations := map[string]string{
				"team":                                "payments",
				"courier.dev/helmop":                  "fleet-default/app",
				"courier.dev/upstream":                upstreamID,
				"courier.dev/source-resource-version": "7",
			}
			if tc.keep {
				wantAnnotations["courier.dev/keep-resources"] = "true"
			}
			if !maps.Equal(got.Labels, wantLabels) {
				t.Errorf("labels = %v, want %v", got.Labels, wantLabels)
			}
			if !maps.Equal(got.Annotations, wantAnnotations) {
				t.Errorf("annotations = %v, want %v", got.Annotations, wantAnnotations)
			}
			if got.Type != corev1.SecretTypeOpaque || string(got.Data["password"]) != canary || len(got.Data) != 1 {
				t.Errorf("copy has type %q and %d keys, want the source's type and data", got.Type, len(got.Data))
			}
			checkStatus(t, "row", env.mustStatus(r), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7", LastSyncTime: syncedAt, Message: syncedMessage})
			checkActions(t, "event", env.takeEvents(), []string{"Normal Copied Secret db copied to apps/db in cluster c1"})
			if env.statusChanges == 0 {
				t.Error("OnStatusChange was not called")
			}
			checkReachable(t, 1)
		})
	}
}

func TestReconcileCreatesConfigMapCopy(t *testing.T) {
	src := srcConfigMap("settings", "9")
	src.BinaryData = map[string][]byte{"logo": {0, 1, 2}}
	down := newFakeCluster(true, targetNamespace)
	env := newEnv(t, down, src)
	r := rowOf(src)

	if err := env.reconcile(r); err != nil {
		t.Fatalf("reconcile: %v", err)
	}

	checkActions(t, "downstream", env.downActions(), []string{"get configmaps apps/settings", saLookup, "create namespaces apps", "create configmaps apps/settings"})
	checkActions(t, "upstream", env.upActions(), []string{"get configmaps fleet-default/settings"})
	got, ok := down.configMap(targetNS, "settings")
	if !ok {
		t.Fatal("the copy was not created")
	}
	if want := copyspec.ConfigMap(src, targetNS, owner(appOp, "c1")); !copyspec.ConfigMapUpToDate(got, want) {
		t.Errorf("copy = %+v, want %+v", got, want)
	}
	checkStatus(t, "row", env.mustStatus(r), copycontract.Status{
		Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "9", LastSyncTime: syncedAt, Message: syncedMessage})
}

// Copies that are already current are not written, and with synced
// informers not even read.
func TestReconcileAlreadyCurrent(t *testing.T) {
	cases := []struct {
		name     string
		synced   bool
		wantDown []string
	}{
		{name: "informers synced: no request for the copies", synced: true, wantDown: []string{}},
		{name: "informers not synced: reads, no writes", wantDown: []string{"get configmaps apps/settings", "get secrets apps/db", "list secrets " + c1Selector, "list configmaps " + c1Selector}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, settings := srcSecret("db", "7"), srcConfigMap("settings", "9")
			down := newFakeCluster(tc.synced, targetNamespace,
				secretCopy(db, targetNS, owner(appOp, "c1")), configMapCopy(settings, targetNS, owner(appOp, "c1")))
			env := newEnv(t, down, db, settings)
			rows := []*courier.DownstreamCopy{rowOf(db), rowOf(settings)}

			if err := env.reconcile(rows...); err != nil {
				t.Fatalf("reconcile: %v", err)
			}

			checkActions(t, "downstream", env.downActions(), tc.wantDown)
			if w := writes(down.kube.Actions()); len(w) != 0 {
				t.Errorf("wrote %q to a cluster whose copies are current", actionStrings(w))
			}
			// LastSyncTime: when this process first confirmed the copy current.
			checkStatus(t, "Secret row", env.mustStatus(rows[0]), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7", LastSyncTime: syncedAt, Message: syncedMessage})
			checkStatus(t, "ConfigMap row", env.mustStatus(rows[1]), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "9", LastSyncTime: syncedAt, Message: syncedMessage})
			checkActions(t, "event", env.takeEvents(), nil)

			// A second pass reads the unchanged sources from the engine's cache.
			if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
				t.Fatalf("second reconcile: %v", err)
			}
			checkActions(t, "upstream", env.upActions(), []string{"get configmaps fleet-default/settings", "get secrets fleet-default/db"})
			if w := writes(down.kube.Actions()); len(w) != 0 {
				t.Errorf("second pass wrote %q", actionStrings(w))
			}
		})
	}
}

// A copy that differs from its source is updated, or deleted and
// created again when the API server would refuse the update. The informer
// holds the copy, so no live read precedes the write.
func TestReconcileRepairsDrift(t *testing.T) {
	immutable := func(s *corev1.Secret) { s.Immutable = ptr(true) }
	cases := []struct {
		name     string
		src, cur runtime.Object // cur nil: the copy was deleted downstream
		wantDown []string
	}{
		{
			name:     "Secret data edited downstream",
			src:      srcSecret("db", "7"),
			cur:      secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1"), func(s *corev1.Secret) { s.Data["password"] = []byte("edited") }),
			wantDown: []string{saLookup, "update secrets apps/db"},
		},
		{
			name:     "label added downstream",
			src:      srcSecret("db", "7"),
			cur:      secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1"), func(s *corev1.Secret) { s.Labels["added"] = "by-someone" }),
			wantDown: []string{saLookup, "update secrets apps/db"},
		},
		{
			name:     "source changed upstream",
			src:      withSecretData(srcSecret("db", "8"), canary+"-v2"),
			cur:      secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1")),
			wantDown: []string{saLookup, "update secrets apps/db"},
		},
		{
			name:     "copy deleted downstream",
			src:      srcSecret("db", "7"),
			wantDown: []string{"get secrets apps/db", saLookup, "create namespaces apps", "create secrets apps/db"},
		},
		{
			name:     "immutable copy with other data",
			src:      withSecretData(secretWith(srcSecret("db", "8"), immutable), canary+"-v2"),
			cur:      secretCopy(secretWith(srcSecret("db", "7"), immutable), targetNS, owner(appOp, "c1")),
			wantDown: []string{saLookup, "delete secrets apps/db", "create secrets apps/db"},
		},
		{
			name:     "Secret type changed",
			src:      secretWith(srcSecret("db", "8"), func(s *corev1.Secret) { s.Type = "example.com/custom" }),
			cur:      secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1")),
			wantDown: []string{saLookup, "delete secrets apps/db", "create secrets apps/db"},
		},
		{
			name:     "ConfigMap data edited downstream",
			src:      srcConfigMap("settings", "9"),
			cur:      configMapCopy(srcConfigMap("settings", "9"), targetNS, owner(appOp, "c1"), func(c *corev1.ConfigMap) { c.Data["url"] = "edited" }),
			wantDown: []string{saLookup, "update configmaps apps/settings"},
		},
		{
			name: "immutable ConfigMap with other data",
			src: func() runtime.Object {
				c := srcConfigMap("settings", "10")
				c.Immutable, c.Data["url"] = ptr(true), "postgres://db2.apps:5432"
				return c
			}(),
			cur:      configMapCopy(srcConfigMap("settings", "9"), targetNS, owner(appOp, "c1"), func(c *corev1.ConfigMap) { c.Immutable = ptr(true) }),
			wantDown: []string{saLookup, "delete configmaps apps/settings", "create configmaps apps/settings"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			existing := []runtime.Object{targetNamespace}
			if tc.cur != nil {
				existing = append(existing, tc.cur)
			}
			down := newFakeCluster(true, existing...)
			env := newEnv(t, down, tc.src)
			r := rowOf(tc.src)
			srcMeta, _ := meta.Accessor(tc.src)

			if err := env.reconcile(r); err != nil {
				t.Fatalf("reconcile: %v", err)
			}

			checkActions(t, "downstream", env.downActions(), tc.wantDown)
			actions := down.kube.Actions()
			if a := findAction(actions, "update", gvrOf(tc.src).Resource); a != nil {
				if rv := a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetResourceVersion(); rv != "100" {
					t.Errorf("update sent resourceVersion %q, want the live object's %q", rv, "100")
				}
			}
			if a := findAction(actions, "delete", gvrOf(tc.src).Resource); a != nil {
				checkUIDPrecondition(t, a, tc.cur.(metav1.Object).GetUID())
			}
			o := owner(appOp, "c1")
			switch src := tc.src.(type) {
			case *corev1.Secret:
				got, ok := down.secret(targetNS, src.Name)
				if !ok || !copyspec.SecretUpToDate(got, copyspec.Secret(src, targetNS, o)) {
					t.Errorf("copy after reconcile = %+v, want it to match the source", got)
				}
			case *corev1.ConfigMap:
				got, ok := down.configMap(targetNS, src.Name)
				if !ok || !copyspec.ConfigMapUpToDate(got, copyspec.ConfigMap(src, targetNS, o)) {
					t.Errorf("copy after reconcile = %+v, want it to match the source", got)
				}
			}
			checkStatus(t, "row", env.mustStatus(r), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: srcMeta.GetResourceVersion(), LastSyncTime: syncedAt, Message: syncedMessage})
			checkActions(t, "event", env.takeEvents(), []string{fmt.Sprintf("Normal Copied %s %s copied to apps/%[2]s in cluster c1", kindOf(tc.src), srcMeta.GetName())})
		})
	}
}

func ptr[T any](v T) *T { return &v }

func secretWith(s *corev1.Secret, edit func(*corev1.Secret)) *corev1.Secret {
	edit(s)
	return s
}

func withSecretData(s *corev1.Secret, password string) *corev1.Secret {
	s.Data["password"] = []byte(password)
	return s
}

func checkUIDPrecondition(t *testing.T, a k8stesting.Action, want types.UID) {
	t.Helper()
	opts := a.(k8stesting.DeleteAction).GetDeleteOptions()
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != want {
		t.Errorf("delete of %s has preconditions %+v, want UID %q", actionStrings([]k8stesting.Action{a}), opts.Preconditions, want)
	}
}

// An object of the same name that is not this HelmOp's copy is
// neither overwritten nor deleted.
func TestReconcileConflict(t *testing.T) {
	db := srcSecret("db", "7")
	cases := []struct {
		name      string
		existing  *corev1.Secret
		otherRows []*courier.DownstreamCopy
		wantMsg   string
	}{
		{
			name:     "unlabelled object",
			existing: unmanagedSecret(targetNS, "db"),
			wantMsg:  "Secret apps/db exists in cluster c1 and is not managed by Courier; it is left unchanged",
		},
		{
			name:      "copy of another HelmOp that lists the same Secret",
			existing:  secretCopy(db, targetNS, owner(otherOp, "c1")),
			otherRows: []*courier.DownstreamCopy{rowFor(otherOp.Name, "c1", "Secret", "db", "7", courier.CopyPhasePending)},
			wantMsg:   `Secret apps/db exists in cluster c1 and belongs to another owner (HelmOp "fleet-default/other"); it is left unchanged`,
		},
		{
			name:     "copy made by another upstream",
			existing: secretCopy(db, targetNS, copyspec.Owner{UpstreamID: "up-2", HelmOp: appOp, Cluster: "c1"}),
			wantMsg:  `Secret apps/db exists in cluster c1 and belongs to another owner (HelmOp "fleet-default/app"); it is left unchanged`,
		},
		{
			name: "managed-by label without owner label",
			existing: secretCopy(db, targetNS, owner(appOp, "c1"), func(s *corev1.Secret) {
				delete(s.Labels, copyspec.LabelOwner)
				s.Data["password"] = []byte("theirs")
			}),
			wantMsg: `Secret apps/db exists in cluster c1 and belongs to another owner (HelmOp "fleet-default/app"); it is left unchanged`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			down := newFakeCluster(true, targetNamespace, tc.existing)
			env := newEnv(t, down, db)
			r := rowOf(db)

			if err := env.reconcile(append([]*courier.DownstreamCopy{r}, tc.otherRows...)...); err != nil {
				t.Fatalf("reconcile: %v", err)
			}

			checkActions(t, "downstream", env.downActions(), []string{"get secrets apps/db"})
			got, ok := down.secret(targetNS, "db")
			if !ok {
				t.Fatal("the object was deleted")
			}
			if !equality.Semantic.DeepEqual(got.Data, tc.existing.Data) || !maps.Equal(got.Labels, tc.existing.Labels) ||
				!maps.Equal(got.Annotations, tc.existing.Annotations) || got.ResourceVersion != tc.existing.ResourceVersion {
				t.Errorf("the object was changed: %+v", got)
			}
			st := env.mustStatus(r)
			checkStatus(t, "row", st, copycontract.Status{Phase: courier.CopyPhaseConflict, Message: tc.wantMsg})
			checkActions(t, "event", env.takeEvents(), []string{"Warning Conflict " + tc.wantMsg})
			for _, o := range tc.otherRows {
				checkStatus(t, "the owner's row", env.mustStatus(o), copycontract.Status{
					Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7", LastSyncTime: syncedAt, Message: syncedMessage})
			}
		})
	}
}

// The sweep deletes this Cluster's copies that no row wants, and
// nothing else.
func TestSweep(t *testing.T) {
	const keptCase = "copy written with keepResources"
	db, old, settings := srcSecret("db", "7"), srcSecret("old", "3"), srcConfigMap("settings", "4")
	cases := []struct {
		name    string
		obj     runtime.Object
		deleted bool
	}{
		{"copy of an entry removed from the list", secretCopy(old, targetNS, owner(appOp, "c1")), true},
		{"ConfigMap copy of an entry removed from the list", configMapCopy(settings, targetNS, owner(appOp, "c1")), true},
		{"copy of a deleted HelmOp", secretCopy(old, targetNS, owner(types.NamespacedName{Namespace: fleetNS, Name: "gone"}, "c1")), true},
		{"copy left in the previous target namespace", secretCopy(db, "old-apps", owner(appOp, "c1")), true},

		{keptCase, secretCopy(old, targetNS, copyspec.Owner{UpstreamID: upstreamID, HelmOp: appOp, Cluster: "c1", Keep: true}), false},
		{"copy made for another Cluster on the same kube-apiserver", secretCopy(old, targetNS, owner(appOp, "c2")), false},
		{"copy made by another upstream", secretCopy(old, targetNS, copyspec.Owner{UpstreamID: "up-2", HelmOp: appOp, Cluster: "c1"}), false},
		{"owner label does not match the annotations", secretCopy(old, targetNS, owner(appOp, "c1"), func(s *corev1.Secret) {
			s.Annotations[copyspec.AnnotationHelmOp] = otherOp.String()
		}), false},
		{"owner label missing", secretCopy(old, targetNS, owner(appOp, "c1"), func(s *corev1.Secret) { delete(s.Labels, copyspec.LabelOwner) }), false},
		{"upstream annotation missing", secretCopy(old, targetNS, owner(appOp, "c1"), func(s *corev1.Secret) {
			delete(s.Annotations, copyspec.AnnotationUpstream)
		}), false},
		// Several Clusters may reach one kube-apiserver: a copy that does not
		// say which one it was made for is nobody's to remove.
		{"copy that names no Cluster", secretCopy(old, targetNS, owner(appOp, "")), false},
		{"copy claiming a HelmOp in another namespace", secretCopy(old, targetNS, owner(types.NamespacedName{Namespace: "other-ns", Name: "app"}, "c1")), false},
		{"unlabelled object", unmanagedSecret(targetNS, "old"), false},
	}
	for _, tc := range cases {
		for _, synced := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/synced=%t", tc.name, synced), func(t *testing.T) {
				wanted := secretCopy(db, targetNS, owner(appOp, "c1"))
				down := newFakeCluster(synced, targetNamespace, wanted, tc.obj)
				down.cache(tc.obj) // even if the informer's label filter let it through
				env := newEnv(t, down, db)
				m := tc.obj.(metav1.Object)

				if err := env.reconcile(rowOf(db)); err != nil {
					t.Fatalf("reconcile: %v", err)
				}

				_, err := down.kube.Tracker().Get(gvrOf(tc.obj), m.GetNamespace(), m.GetName())
				if exists := err == nil; exists == tc.deleted {
					t.Errorf("object exists after the sweep: %t, want %t", exists, !tc.deleted)
				}
				if _, ok := down.secret(targetNS, "db"); !ok {
					t.Error("the wanted copy was deleted")
				}
				// What stays of a copy Courier made for this Cluster is a
				// row: Kept under keepResources. Objects that are not its
				// copies for c1 give no row.
				var leftovers []string
				for _, l := range env.leftovers() {
					leftovers = append(leftovers, fmt.Sprintf("%s %s/%s %s", l.Phase, l.TargetNamespace, l.Name, l.HelmOp.Name))
				}
				var wantLeft []string
				if tc.name == keptCase {
					wantLeft = []string{"Kept apps/old app"}
				}
				checkActions(t, "leftovers", leftovers, wantLeft)
				w := writes(down.kube.Actions())
				if !tc.deleted {
					checkActions(t, "write", actionStrings(w), nil)
					checkActions(t, "event", env.takeEvents(), nil)
					return
				}
				resource := gvrOf(tc.obj).Resource
				checkActions(t, "write", actionStrings(w), []string{"delete " + resource + " " + m.GetNamespace() + "/" + m.GetName()})
				if len(w) == 1 {
					checkUIDPrecondition(t, w[0], m.GetUID())
				}
				checkActions(t, "event", env.takeEvents(), []string{fmt.Sprintf("Normal Removed %s %s removed from %s in cluster c1",
					kindOf(tc.obj), m.GetName(), m.GetNamespace())})
			})
		}
	}
}

// A failed removal is retried, except when the object is already gone or
// was replaced (the UID precondition failed).
func TestSweepErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	cases := []struct {
		name      string
		err       error
		wantErr   string
		reachable float64 // -1: not checked
	}{
		{"already deleted", apierrors.NewNotFound(gr, "old"), "", 1},
		{"replaced since it was listed", apierrors.NewConflict(gr, "old", errors.New("Precondition failed: UID in precondition: a, UID in object meta: b")), "", 1},
		{"forbidden", apierrors.NewForbidden(gr, "old", errors.New("denied")), "removing Secret apps/old: ", -1},
		{"unreachable", connRefused(), "removing Secret apps/old: ", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := srcSecret("db", "7")
			down := newFakeCluster(true, targetNamespace, secretCopy(db, targetNS, owner(appOp, "c1")),
				secretCopy(srcSecret("old", "3"), targetNS, owner(appOp, "c1")))
			down.fail("delete", "secrets", tc.err)
			env := newEnv(t, down, db)
			r := rowOf(db)

			err := env.reconcile(r)

			checkActions(t, "downstream", env.downActions(), []string{"delete secrets apps/old"})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("reconcile: %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("reconcile: %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.reachable >= 0 {
				checkReachable(t, tc.reachable)
			}
			checkStatus(t, "row", env.mustStatus(r), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7", LastSyncTime: syncedAt, Message: syncedMessage})
			// A copy that could not be removed has a Deleting row saying why.
			var leftovers []string
			for _, l := range env.leftovers() {
				leftovers = append(leftovers, string(l.Phase)+": "+l.Message)
			}
			var wantLeft []string
			if tc.wantErr != "" {
				wantLeft = []string{"Deleting: removing Secret apps/old from cluster c1 failed: " + tc.err.Error()}
			}
			checkActions(t, "leftovers", leftovers, wantLeft)
		})
	}
}

// Rows the engine must not write leave the cluster alone, and a
// missing source never removes the copy made from it.
func TestRowsNotCopied(t *testing.T) {
	oldCopy := secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1"))
	cases := []struct {
		name       string
		rows       []*courier.DownstreamCopy
		sources    []runtime.Object
		existing   []runtime.Object
		wantDown   []string
		wantUp     []string
		wantStatus *copycontract.Status // of rows[0]; nil: none recorded
	}{
		{
			name:     "SourceMissing row keeps its copy",
			rows:     []*courier.DownstreamCopy{row("Secret", "db", "", courier.CopyPhaseSourceMissing)},
			existing: []runtime.Object{oldCopy},
		},
		{
			name: "Invalid rows",
			rows: []*courier.DownstreamCopy{
				row("Pod", "db", "", courier.CopyPhaseInvalid),
				row("Secret", "", "", courier.CopyPhaseInvalid),
			},
			// db exists upstream but only an Invalid row names it.
			sources: []runtime.Object{srcSecret("db", "7")},
		},
		{
			name:     "Pending row whose source was deleted since",
			rows:     []*courier.DownstreamCopy{row("Secret", "db", "7", courier.CopyPhasePending)},
			existing: []runtime.Object{oldCopy},
			wantDown: []string{},
			wantUp:   []string{"get secrets fleet-default/db"},
			// The engine does not decide SourceMissing: the view does.
			wantStatus: &copycontract.Status{Phase: courier.CopyPhasePending,
				Message: "source Secret fleet-default/db not found upstream; waiting for the view"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			down := newFakeCluster(true, append([]runtime.Object{targetNamespace}, tc.existing...)...)
			env := newEnv(t, down, tc.sources...)

			if err := env.reconcile(tc.rows...); err != nil {
				t.Fatalf("reconcile: %v", err)
			}

			checkActions(t, "downstream", env.downActions(), tc.wantDown)
			if w := writes(down.kube.Actions()); len(w) != 0 {
				t.Errorf("wrote %q", actionStrings(w))
			}
			checkActions(t, "upstream", env.upActions(), tc.wantUp)
			for _, obj := range tc.existing {
				m := obj.(metav1.Object)
				if _, err := down.kube.Tracker().Get(gvrOf(obj), m.GetNamespace(), m.GetName()); err != nil {
					t.Errorf("%s/%s: %v", m.GetNamespace(), m.GetName(), err)
				}
			}
			st, ok := env.status(tc.rows[0])
			switch {
			case tc.wantStatus == nil && ok:
				t.Errorf("status recorded for a row the engine does not copy: %+v", st)
			case tc.wantStatus != nil && !ok:
				t.Error("no status recorded")
			case tc.wantStatus != nil:
				checkStatus(t, "row", st, *tc.wantStatus)
			}
			for _, r := range tc.rows[1:] {
				if st, ok := env.status(r); ok {
					t.Errorf("status recorded for %s: %+v", keyOf(r), st)
				}
			}
			checkActions(t, "event", env.takeEvents(), nil)
		})
	}
}

// An unreachable cluster stops the pass: the row that failed and
// every row not yet handled are Unreachable, nothing more is written, there
// is no sweep, and the cluster is retried. Rows already written in the pass
// keep their status: their copies are there.
func TestReconcileUnreachable(t *testing.T) {
	refuseCreateOf := func(name string) func(*fakeCluster) {
		return func(c *fakeCluster) {
			c.kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				return a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName() == name, nil, connRefused()
			})
		}
	}
	cases := []struct {
		name          string
		refuse        func(*fakeCluster)
		rows          []*courier.DownstreamCopy // Pending Secret rows, in row key order; each source exists
		wantDown      []string
		wantSynced    []string // rows written before the failure
		wantMsgPrefix string   // of the row that failed
		failed        string   // that row's source name
	}{
		{
			name:   "connection refused creating a copy",
			refuse: refuseCreateOf("b"),
			rows: []*courier.DownstreamCopy{row("Secret", "a", "1", courier.CopyPhasePending), row("Secret", "b", "1", courier.CopyPhasePending),
				row("Secret", "c", "1", courier.CopyPhasePending)},
			wantDown:      []string{"get secrets apps/a", "get secrets apps/b", "get secrets apps/c", saLookup, "create namespaces apps", "create secrets apps/a", "create secrets apps/b"},
			wantSynced:    []string{"a"},
			wantMsgPrefix: "cluster c1 is unreachable: creating Secret apps/b as Courier's own identity: ",
			failed:        "b",
		},
		{
			name:   "connection refused writing another HelmOp's copy",
			refuse: refuseCreateOf("b"),
			rows: []*courier.DownstreamCopy{row("Secret", "a", "1", courier.CopyPhasePending),
				rowFor(otherOp.Name, "c1", "Secret", "b", "1", courier.CopyPhasePending), rowFor(otherOp.Name, "c1", "Secret", "c", "1", courier.CopyPhasePending)},
			wantDown:      []string{"get secrets apps/a", saLookup, "create namespaces apps", "create secrets apps/a", "get secrets apps/b", "get secrets apps/c", "create secrets apps/b"},
			wantSynced:    []string{"a"},
			wantMsgPrefix: "cluster c1 is unreachable: creating Secret apps/b as Courier's own identity: ",
			failed:        "b",
		},
		{
			name:   "connection refused on every request",
			refuse: func(c *fakeCluster) { c.fail("*", "*", connRefused()) },
			rows: []*courier.DownstreamCopy{row("Secret", "a", "1", courier.CopyPhasePending), row("Secret", "b", "1", courier.CopyPhasePending),
				row("Secret", "c", "1", courier.CopyPhasePending)},
			wantDown:      []string{"get secrets apps/a"},
			wantMsgPrefix: "cluster c1 is unreachable: reading Secret apps/a: ",
			failed:        "a",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			down := newFakeCluster(false)
			tc.refuse(down)
			env := newEnv(t, down, srcSecret("a", "1"), srcSecret("b", "1"), srcSecret("c", "1"))
			missing := row("Secret", "d", "", courier.CopyPhaseSourceMissing)

			err := env.reconcile(append(tc.rows, missing)...)

			if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("reconcile: %v, want the connection error", err)
			}
			// Nothing after the failure, and no sweep (whose live lists would show).
			checkActions(t, "downstream", env.downActions(), tc.wantDown)
			failedAt := -1
			for i, r := range tc.rows {
				name := r.Spec.Source.Name
				st := env.mustStatus(r)
				switch {
				case slices.Contains(tc.wantSynced, name):
					checkStatus(t, name, st, copycontract.Status{
						Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "1", LastSyncTime: syncedAt, Message: syncedMessage})
					if _, ok := down.secret(targetNS, name); !ok {
						t.Errorf("copy %s was not written", name)
					}
				case name == tc.failed:
					failedAt = i
					if st.Phase != courier.CopyPhaseUnreachable || !strings.HasPrefix(st.Message, tc.wantMsgPrefix) ||
						!strings.HasSuffix(st.Message, "connection refused") {
						t.Errorf("status of %s = %+v, want Unreachable with message %q...connection refused", name, st, tc.wantMsgPrefix)
					}
				default:
					if failedAt < 0 || st.Phase != courier.CopyPhaseUnreachable || !strings.Contains(st.Message, "connection refused") {
						t.Errorf("status of %s = %+v, want Unreachable (connection refused)", name, st)
					}
				}
			}
			if st, ok := env.status(missing); ok {
				t.Errorf("status recorded for the SourceMissing row: %+v", st)
			}
			checkReachable(t, 0)
		})
	}
}

// When the cluster has no client, every row the engine copies says
// why.
func TestReconcileNoClient(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"kubeconfig error", &downstream.KubeconfigError{Cluster: clusterKey, Msg: "kubeconfig Secret fleet-default/c1-kubeconfig does not exist"}},
		{"kubeconfig Secret unreadable", errors.New("reading kubeconfig Secret fleet-default/c1-kubeconfig of cluster c1: etcdserver: request timed out")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, nil, srcSecret("a", "1"), srcConfigMap("b", "2"))
			env.ds.err = tc.err
			a, b := row("Secret", "a", "1", courier.CopyPhasePending), row("ConfigMap", "b", "2", courier.CopyPhasePending)
			invalid, missing := row("Pod", "p", "", courier.CopyPhaseInvalid), row("Secret", "c", "", courier.CopyPhaseSourceMissing)

			err := env.reconcile(a, b, invalid, missing)

			if !errors.Is(err, tc.err) {
				t.Errorf("reconcile: %v, want %v", err, tc.err)
			}
			for _, r := range []*courier.DownstreamCopy{a, b} {
				checkStatus(t, keyOf(r), env.mustStatus(r), copycontract.Status{Phase: courier.CopyPhaseUnreachable, Message: tc.err.Error()})
			}
			for _, r := range []*courier.DownstreamCopy{invalid, missing} {
				if st, ok := env.status(r); ok {
					t.Errorf("status recorded for %s: %+v", keyOf(r), st)
				}
			}
			checkActions(t, "upstream", env.upActions(), nil)
			if env.statusChanges != 1 {
				t.Errorf("OnStatusChange called %d times, want 1", env.statusChanges)
			}
		})
	}
}

// A deleted Cluster's client is dropped; there is nothing left to reach.
func TestReconcileClusterGone(t *testing.T) {
	env := newEnv(t, newFakeCluster(true))
	env.setDesired()
	if err := env.e.reconcileCluster(env.ctx, fleetNS+"/gone"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if env.ds.gets != 0 || !slices.Equal(env.ds.forgotten, []string{fleetNS + "/gone"}) {
		t.Errorf("Downstream.Get called %d times, Forget called with %q; want 0 and [%s/gone]", env.ds.gets, env.ds.forgotten, fleetNS)
	}
}

// Courier's own identity creates a destination namespace without reading
// it first. Where it may not create namespaces but the namespace exists,
// the refusal is followed by a read, and the copies are written: an
// identity that could write them before (it read the namespace, found it
// and never created it) still can.
func TestOwnIdentityMayNotCreateAnExistingNamespace(t *testing.T) {
	for _, exists := range []bool{true, false} {
		t.Run(fmt.Sprintf("namespace exists: %v", exists), func(t *testing.T) {
			db := srcSecret("db", "7")
			var existing []runtime.Object
			if exists {
				existing = append(existing, targetNamespace)
			}
			down := newFakeCluster(true, existing...)
			down.fail("create", "namespaces", apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "apps", errors.New("may not create namespaces")))
			env := newEnv(t, down, db)
			err := env.reconcile(rowOf(db))
			st := env.mustStatus(rowOf(db))
			if exists {
				if err != nil || st.Phase != courier.CopyPhaseSynced {
					t.Fatalf("reconcile: %v, status %+v; want the copy written into the existing namespace", err, st)
				}
				checkActions(t, "downstream", env.downActions(), []string{"get secrets apps/db", saLookup, "create namespaces apps", "get namespaces apps", "create secrets apps/db"})
				return
			}
			if err == nil || st.Phase != courier.CopyPhaseForbidden || !strings.Contains(st.Message, "creating namespace apps as Courier's own identity") {
				t.Fatalf("reconcile: %v, status %+v; want Forbidden naming the namespace", err, st)
			}
			if _, ok := down.secret(targetNS, "db"); ok {
				t.Error("the copy was written though its namespace could not be made")
			}
		})
	}
}

// A refused write leaves the row Forbidden (other rows go on), and
// the cluster is retried until the write is allowed.
func TestReconcileWriteRefused(t *testing.T) {
	denial := `User "system:serviceaccount:cattle-fleet-system:deployer" cannot create resource "secrets" in API group "" in the namespace "apps"`
	drifted := secretCopy(srcSecret("db", "7"), targetNS, owner(appOp, "c1"), func(s *corev1.Secret) { s.Data["password"] = []byte("edited") })
	cases := []struct {
		name           string
		existing       []runtime.Object
		verb, resource string
		err            error
		wantPhase      courier.CopyPhase
		wantMsg        string // prefix; the API error follows
		settingsFails  bool   // the ConfigMap row fails too
	}{
		{
			name: "creating the Secret is forbidden", existing: []runtime.Object{targetNamespace},
			verb: "create", resource: "secrets",
			err:       apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db", errors.New(denial)),
			wantPhase: courier.CopyPhaseForbidden, wantMsg: "creating Secret apps/db as Courier's own identity in cluster c1: ",
		},
		{
			name: "creating the namespace is forbidden", verb: "create", resource: "namespaces",
			err:       apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "apps", errors.New(denial)),
			wantPhase: courier.CopyPhaseForbidden, wantMsg: "creating namespace apps as Courier's own identity in cluster c1: ", settingsFails: true,
		},
		{
			name: "updating a drifted copy is forbidden", existing: []runtime.Object{targetNamespace, drifted},
			verb: "update", resource: "secrets",
			err:       apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db", errors.New(denial)),
			wantPhase: courier.CopyPhaseForbidden, wantMsg: "updating Secret apps/db as Courier's own identity in cluster c1: ",
		},
		{
			name: "other API error", existing: []runtime.Object{targetNamespace},
			verb: "create", resource: "secrets",
			err:       apierrors.NewInternalError(errors.New("etcdserver: leader changed")),
			wantPhase: courier.CopyPhasePending, wantMsg: "creating Secret apps/db as Courier's own identity in cluster c1 failed: ",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, settings := srcSecret("db", "7"), srcConfigMap("settings", "9")
			down := newFakeCluster(false, tc.existing...)
			denied := true
			down.kube.PrependReactor(tc.verb, tc.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return denied, nil, tc.err
			})
			env := newEnv(t, down, db, settings)
			dbRow, settingsRow := rowOf(db), rowOf(settings)

			err := env.reconcile(dbRow, settingsRow)

			if err == nil || !strings.Contains(err.Error(), tc.err.Error()) {
				t.Errorf("reconcile: %v, want an error carrying %q so that the cluster is retried", err, tc.err)
			}
			st := env.mustStatus(dbRow)
			checkStatus(t, "db", st, copycontract.Status{Phase: tc.wantPhase, Message: tc.wantMsg + tc.err.Error()})
			if tc.wantPhase == courier.CopyPhaseForbidden && !strings.Contains(st.Message, denial) {
				t.Errorf("message %q does not carry the API error", st.Message)
			}
			reason := map[courier.CopyPhase]string{courier.CopyPhaseForbidden: "Forbidden", courier.CopyPhasePending: "CopyFailed"}[tc.wantPhase]
			events := env.takeEvents()
			if !slices.Contains(events, "Warning "+reason+" "+st.Message) {
				t.Errorf("events %q lack the %s warning", events, reason)
			}
			if got, ok := down.secret(targetNS, "db"); ok && string(got.Data["password"]) == canary {
				t.Error("the refused write happened anyway")
			}
			if tc.settingsFails {
				if st := env.mustStatus(settingsRow); st.Phase != tc.wantPhase {
					t.Errorf("ConfigMap row: %+v, want %s", st, tc.wantPhase)
				}
			} else {
				checkStatus(t, "settings", env.mustStatus(settingsRow), copycontract.Status{
					Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "9", LastSyncTime: syncedAt, Message: syncedMessage})
			}
			if !slices.Contains(env.downActions(), "list secrets "+c1Selector) {
				t.Errorf("a refused write stopped the sweep: %q", env.downActions())
			}

			// Once the write is allowed, the next pass converges.
			denied = false
			if err := env.e.reconcileCluster(env.ctx, clusterKey); err != nil {
				t.Fatalf("reconcile after the grant: %v", err)
			}
			checkStatus(t, "db after the grant", env.mustStatus(dbRow), copycontract.Status{
				Phase: courier.CopyPhaseSynced, SyncedResourceVersion: "7", LastSyncTime: syncedAt, Message: syncedMessage})
			if got, ok := down.secret(targetNS, "db"); !ok || string(got.Data["password"]) != canary {
				t.Error("the copy was not written after the grant")
			}
		})
	}
}

// processNext requeues a cluster that did not converge with backoff, and
// forgets the backoff once it does.
func TestProcessNextRetries(t *testing.T) {
	down := newFakeCluster(true, targetNamespace)
	denied := true
	down.kube.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return denied, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db", errors.New("denied"))
	})
	env := newEnv(t, down, srcSecret("db", "7"))
	env.setDesired(row("Secret", "db", "7", courier.CopyPhasePending))
	drain(env.e.queue)

	env.e.queue.Add(clusterKey)
	env.e.processNext(env.ctx)
	if n := env.e.queue.NumRequeues(clusterKey); n != 1 {
		t.Fatalf("requeues after a refused write = %d, want 1", n)
	}
	denied = false
	env.e.queue.Add(clusterKey)
	env.e.processNext(env.ctx)
	if n := env.e.queue.NumRequeues(clusterKey); n != 0 {
		t.Errorf("requeues after converging = %d, want 0", n)
	}
}

// With --require-service-account, a HelmOp that names no ServiceAccount
// (and no fallback exists) gets nothing written; removals, which need no
// ServiceAccount, still happen.
func TestReconcileRequireServiceAccount(t *testing.T) {
	db := srcSecret("db", "7")
	stale := secretCopy(srcSecret("old", "3"), targetNS, owner(appOp, "c1"))
	down := newFakeCluster(true, targetNamespace, stale)
	env := newEnv(t, down, db)
	env.e.cfg.RequireServiceAccount = true
	r := rowOf(db)

	err := env.reconcile(r)

	const msg = "a ServiceAccount is required (--require-service-account): the HelmOp names none and cattle-fleet-system/fleet-default does not exist in the cluster"
	if err == nil || !strings.Contains(err.Error(), msg) {
		t.Errorf("reconcile: %v, want an error carrying %q so that the cluster is retried", err, msg)
	}
	checkStatus(t, "row", env.mustStatus(r), copycontract.Status{Phase: courier.CopyPhaseForbidden, Message: msg})
	// Planned (read-only), then refused before any write; the sweep still runs.
	checkActions(t, "downstream", env.downActions(), []string{"get secrets apps/db", saLookup, "delete secrets apps/old"})
	checkActions(t, "event", env.takeEvents(), []string{
		"Warning Forbidden " + msg,
		"Normal Removed Secret old removed from apps in cluster c1",
	})
}

// The data of a copied Secret appears in no status message, Event
// or log line, whatever happens to the copy. (Every test checks this on
// cleanup; this one makes sure every kind of message is produced.)
func TestNoSecretDataInMessages(t *testing.T) {
	srcs := []runtime.Object{srcSecret("a", "1"), srcSecret("b", "1"), srcSecret("c", "1"), srcSecret("d", "1"), srcSecret("e", "1")}
	down := newFakeCluster(true, targetNamespace,
		secretCopy(srcSecret("b", "1"), targetNS, owner(appOp, "c1"), func(s *corev1.Secret) { s.Data["password"] = []byte("edited") }),
		unmanagedSecret(targetNS, "c"),
		secretCopy(srcSecret("old", "1"), targetNS, owner(appOp, "c1")))
	down.kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName() != "d" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "d", errors.New("denied"))
	})
	env := newEnv(t, down, srcs...)
	rows := []*courier.DownstreamCopy{
		row("Secret", "a", "1", courier.CopyPhasePending), // created
		row("Secret", "b", "1", courier.CopyPhasePending), // updated
		row("Secret", "c", "1", courier.CopyPhasePending), // conflict
		row("Secret", "d", "1", courier.CopyPhasePending), // forbidden
		row("Secret", "f", "1", courier.CopyPhasePending), // source not found upstream (Pending: only the view says SourceMissing)
	}
	_ = env.reconcile(rows...)
	phases := map[courier.CopyPhase]bool{}
	for _, r := range rows {
		phases[env.mustStatus(r).Phase] = true
	}
	// Then the cluster stops answering.
	down.fail("*", "*", connRefused())
	rows[1].Spec.Source.ResourceVersion = "2" // b changed upstream
	_ = env.upstream.CoreV1().Secrets(fleetNS).Delete(env.ctx, "b", metav1.DeleteOptions{})
	_, _ = env.upstream.CoreV1().Secrets(fleetNS).Create(env.ctx, withSecretData(srcSecret("b", "2"), canary+"-v2"), metav1.CreateOptions{})
	down.synced = false
	_ = env.reconcile(rows...)
	phases[env.mustStatus(rows[1]).Phase] = true

	for _, p := range []courier.CopyPhase{courier.CopyPhaseSynced, courier.CopyPhaseConflict, courier.CopyPhaseForbidden,
		courier.CopyPhasePending, courier.CopyPhaseUnreachable} {
		if !phases[p] {
			t.Errorf("no row reached phase %s; the check below would miss its messages", p)
		}
	}
	var reasons []string
	for _, ev := range env.takeEvents() {
		reasons = append(reasons, strings.Fields(ev)[1])
	}
	slices.Sort(reasons)
	if want := []string{"Conflict", "Copied", "Copied", "Forbidden", "Removed"}; !slices.Equal(reasons, want) {
		t.Errorf("event reasons %q, want %q", reasons, want)
	}
	// The data did travel: it is in the copy, just nowhere else.
	if got, ok := down.secret(targetNS, "a"); !ok || string(got.Data["password"]) != canary {
		t.Error("the canary was not copied; this test proves nothing")
	}
	// env's cleanup checks statuses, Events and logs for the canary.
}

// A cluster that rejects the kubeconfig's credentials (401) cannot be used
// at all, like one that cannot be reached: the pass stops at the first
// request and every row says Unreachable with the API error. (Found by
// make chaos: such rows stayed Pending, and each pass sent one failing
// request per copy.)
func TestReconcileUnauthorizedIsUnreachable(t *testing.T) {
	down := newFakeCluster(false)
	down.fail("*", "*", apierrors.NewUnauthorized("Unauthorized"))
	env := newEnv(t, down, srcSecret("a", "1"), srcSecret("b", "1"))
	rows := []*courier.DownstreamCopy{row("Secret", "a", "1", courier.CopyPhasePending), row("Secret", "b", "1", courier.CopyPhasePending)}

	if err := env.reconcile(rows...); !apierrors.IsUnauthorized(err) {
		t.Errorf("reconcile: %v, want the 401", err)
	}
	checkActions(t, "downstream", env.downActions(), []string{"get secrets apps/a"})
	for _, r := range rows {
		st := env.mustStatus(r)
		if st.Phase != courier.CopyPhaseUnreachable || !strings.HasPrefix(st.Message, "cluster c1 is unreachable: ") || !strings.Contains(st.Message, "Unauthorized") {
			t.Errorf("row %s: %s %q, want Unreachable naming the 401", r.Spec.Source.Name, st.Phase, st.Message)
		}
	}
}
