package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
)

const (
	fcNamespace = "bench-fieldcopy"
	fcSource    = "named-source"
	fcTarget    = "fieldcopy-target"
	fcRow       = "configmap." + fcTarget + ".data.token"
)

// fcArgs are `make run`'s field-copy flags, with the benchmark's namespace.
var fcArgs = []string{"--fieldcopy-target=configmaps", "--fieldcopy-namespace=" + fcNamespace}

// testFieldCopyMemory is testMemory with field copies on: Courier
// restarted with fcArgs, one ConfigMap in fcNamespace whose rule names one
// Secret there, then 1,000 Secrets of 64 KiB no rule names created in the
// same namespace. Field copies watch Secrets and ConfigMaps as metadata
// only and read in full just the Secret the rule names, so the growth
// should be that of the metadata, as without field copies. The copy is
// checked before (the positive control) and after (a change of the named
// Secret still arrives).
func testFieldCopyMemory(t *testing.T) {
	ctx := context.Background()
	kube := fastUpstream(t)
	fc, err := versioned.NewForConfig(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	setupFieldCopy(t, ctx, kube)
	token := randomToken(t)
	if _, err := kube.CoreV1().Secrets(fcNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fcSource},
		Data: map[string][]byte{"token": token}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(fcNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fcTarget,
		Annotations: map[string]string{"k8s-copier.fig.org/replace-data.token": "secret:" + fcSource + ":data.token"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A fresh process, as for testMemory, now with field copies on; and
	// without them again for the scenarios after this one.
	restartCourier(t, fcArgs)
	t.Cleanup(func() { restartCourier(t, nil) })
	pid := courier.Pid()
	began := time.Now()
	waitCopied(t, ctx, kube, fc, token)
	firstCopy := time.Since(began)

	waitIdle(t, pid, 30*time.Second)
	before, heapBefore := sampleMemory(t, ctx, pid, 5, time.Second)
	began = time.Now()
	createSecrets(t, ctx, kube, fcNamespace, memSecrets, memSecretKiB<<10)
	created := time.Since(began)
	after, heapAfter := sampleMemory(t, ctx, pid, 10, time.Second)

	// Field copies still work among the unrelated Secrets.
	token = randomToken(t)
	s, err := kube.CoreV1().Secrets(fcNamespace).Get(ctx, fcSource, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"token": token}
	if _, err := kube.CoreV1().Secrets(fcNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	waitCopied(t, ctx, kube, fc, token)
	change := time.Since(began)

	m := memoryResult{scenario: "field copies (" + fcArgs[0] + ", 1 rule naming 1 Secret)", secrets: memSecrets, sizeKiB: memSecretKiB,
		before: before, after: after, heapBefore: heapBefore, heapAfter: heapAfter, targetMiB: memTargetMiB}
	results.addMemory(m)
	results.note("fieldcopy-memory: Courier restarted with %v; the copy and its Applied row were seen %s after Courier was ready; %d Secrets created in %s in %s; Go heap in use %.1f -> %.1f MiB; afterwards a change of the named Secret reached the target in %s",
		fcArgs, firstCopy.Round(10*time.Millisecond), memSecrets, fcNamespace, created.Round(100*time.Millisecond),
		heapBefore/(1<<20), heapAfter/(1<<20), change.Round(10*time.Millisecond))
	t.Logf("RSS before %.1f MiB, after %.1f MiB, delta %.1f MiB", float64(before)/(1<<20), float64(after)/(1<<20), m.deltaMiB())

	if err := kube.CoreV1().Namespaces().Delete(ctx, fcNamespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNamespaceGone(t, kube, fcNamespace)
}

// setupFieldCopy creates fcNamespace and lets Courier update ConfigMaps
// there: its ClusterRole only reads them (as artifacts/examples/
// fieldcopy.yaml does for make run).
func setupFieldCopy(t *testing.T, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fcNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(fcNamespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "courier-fieldcopy"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(fcNamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "courier-fieldcopy"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "courier", Namespace: "courier-system"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "courier-fieldcopy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restartCourier stops Courier and starts it again with these extra flags
// (besides the suite's).
func restartCourier(t *testing.T, extra []string) {
	t.Helper()
	courier.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := courier.StartWith(ctx, extra); err != nil {
		t.Fatalf("restarting Courier with %v: %v", extra, err)
	}
}

// waitCopied waits until the target holds the token (as a Secret's data
// holds it: base64) and its fieldcopies row is Applied.
func waitCopied(t *testing.T, ctx context.Context, kube kubernetes.Interface, fc versioned.Interface, token []byte) {
	t.Helper()
	want := base64.StdEncoding.EncodeToString(token)
	last := "nothing yet"
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(fcNamespace).Get(ctx, fcTarget, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if cm.Data["token"] != want {
			last = "the target does not hold the named Secret's value"
			return false, nil
		}
		row, err := fc.CourierV1alpha1().FieldCopies(fcNamespace).Get(ctx, fcRow, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("row %s: %s", row.Status.Phase, row.Status.Message)
		return row.Status.Phase == "Applied", nil
	})
	if err != nil {
		t.Fatalf("field copy not applied within a minute: %s", last)
	}
}

func randomToken(t *testing.T) []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
