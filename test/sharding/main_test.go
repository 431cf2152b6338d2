// Package sharding runs pkg/sharding's Managers against a real
// kube-apiserver and etcd (test/localenv, built from source): three
// Managers in this one process, so that every hand-over can be timed on
// one clock. It checks docs/design.md#scale-out's promise: every bucket ends with
// exactly one holder, the one rendezvous hashing names; a replica stopped
// hands its buckets over by release; one that stops renewing (a kill, a
// partition) loses them only after the lease expires; and no two
// Managers ever hold one bucket at the same moment.
//
// Like test/e2e it finds or builds the tools (COURIER_TOOLS_BIN, else
// hack/build-tools.sh) and is skipped only in -short mode, so `make test`
// (go test ./test/...) runs it. It needs no Courier binary and no
// downstream cluster: about a minute on 2 cores.
package sharding

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/test/localenv"
)

// namespace holds the Leases, as courier-system does in an install.
const namespace = "courier-system"

var env *localenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	skip := ""
	if testing.Short() {
		skip = "starts a real kube-apiserver and etcd; skipped in -short mode, as the other suites are"
	}
	localenv.SuiteMain("sharding", skip, func() (int, error) { return run(m) })
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := localenv.RepoRoot()
	if err != nil {
		return 0, err
	}
	bin, err := localenv.ToolsBin(ctx, root)
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "courier-sharding-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	env, err = localenv.Start(ctx, localenv.Options{Dir: filepath.Join(dir, "env"), BinDir: bin, Downstreams: -1,
		ReadyTimeout: 3 * time.Minute, Log: func(f string, a ...any) { fmt.Printf("sharding: "+f+"\n", a...) }})
	if err != nil {
		return 0, err
	}
	defer env.Stop()
	admin, err := kubernetes.NewForConfig(env.Upstream.Config)
	if err != nil {
		return 0, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	return m.Run(), nil
}
