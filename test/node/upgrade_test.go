package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testUpgrade runs `helm upgrade` to the images of the second `make image`
// (another tag) while a client runs `kubectl get dcp` through the
// aggregator every 200 ms: no read may fail and no copy may be written
// again downstream (resourceVersions and the downstream audit log).
func testUpgrade(t *testing.T, c *nodeCluster) {
	archive := env.upgradeImages["courier-apiserver"]
	if archive == "" {
		t.Fatal("no second set of images (COURIER_UPGRADE_IMAGES_DIR; `make test-node` builds it with another IMAGE_TAG)")
	}
	before := c.copyVersions(t)
	writesBefore := copyWrites(t, c.down.AuditLog)
	r := startReader(c)
	args := append([]string{"upgrade", "courier", "artifacts/chart", "-n", courierNS, "--reuse-values"},
		c.imageArgs(t, archive)...)
	c.helmRun(t, c.up, args...)
	c.waitCourier(t, 2)
	_, tag := imageRef(t, archive)
	for _, p := range runningPods(t, c, courierNS, "app=courier") {
		if img := p.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+tag) {
			t.Errorf("pod %s runs %s after the upgrade, want tag %s", p.Name, img, tag)
		}
	}
	// Past the rollout: the new leader has resynced every copy.
	time.Sleep(10 * time.Second)
	reads, failures := r.stop()
	t.Logf("%d reads of `kubectl get dcp -A` during the upgrade, %d failed", reads, len(failures))
	if len(failures) > 0 {
		t.Errorf("failed reads during the upgrade:\n%s", strings.Join(failures, "\n"))
	}
	if reads < 20 {
		t.Errorf("only %d reads during the upgrade", reads)
	}
	if after := c.copyVersions(t); after != before {
		t.Errorf("copies rewritten during the upgrade: resourceVersions %s, then %s", before, after)
	}
	if w := copyWrites(t, c.down.AuditLog); len(w) != len(writesBefore) {
		t.Errorf("writes into %s downstream during the upgrade: %v", copyNS, w[len(writesBefore):])
	}
}

// copyVersions are the resourceVersions of both copies downstream.
func (c *nodeCluster) copyVersions(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.downCS.CoreV1().Secrets(copyNS).Get(ctx, "example-credentials", metav1.GetOptions{})
	must(t, err, "the copied Secret")
	cm, err := c.downCS.CoreV1().ConfigMaps(copyNS).Get(ctx, "example-settings", metav1.GetOptions{})
	must(t, err, "the copied ConfigMap")
	return fmt.Sprintf("secret %s, configmap %s", s.ResourceVersion, cm.ResourceVersion)
}

// copyWrites are the writes into copyNS that the audit log at path
// records ("verb resource name by user").
func copyWrites(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	must(t, err, "the audit log")
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			User      struct{ Username string }
			ObjectRef struct{ Resource, Namespace, Name string }
		}
		if json.Unmarshal(s.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.ObjectRef.Namespace != copyNS {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete":
			out = append(out, fmt.Sprintf("%s %s %s by %s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name, e.User.Username))
		}
	}
	must(t, s.Err(), "reading the audit log")
	return out
}

// reader runs `kubectl get dcp -A` every 200 ms until stopped.
type reader struct {
	done     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	reads    int
	failures []string
}

func startReader(c *nodeCluster) *reader {
	r := &reader{done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := c.lenv.Kubectl(ctx, c.up, "get", "dcp", "-A")
			cancel()
			r.mu.Lock()
			r.reads++
			if err != nil {
				r.failures = append(r.failures, fmt.Sprintf("%s: %v %s", time.Now().Format(time.RFC3339Nano), err, out))
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *reader) stop() (int, []string) {
	close(r.done)
	r.wg.Wait()
	return r.reads, r.failures
}

// testLeaderDeleted deletes the Pod holding the Lease, waits until it is
// gone (so that it cannot be the one writing), and changes the source
// ConfigMap: the change must reach the downstream cluster within 60 s of
// the deletion (another replica takes the Lease over).
func testLeaderDeleted(t *testing.T, c *nodeCluster) {
	leader := c.leader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	must(t, c.cs.CoreV1().Pods(courierNS).Delete(ctx, leader, metav1.DeleteOptions{}), "deleting the leader %s", leader)
	c.kubectl(t, c.up, "-n", courierNS, "wait", "--for=delete", "pod/"+leader, "--timeout=60s")
	gone := time.Since(began)
	patch := `{"data":{"greeting":"hello after the leader went"}}`
	c.kubectl(t, c.up, "-n", workspace, "patch", "configmap", "example-settings", "--type=merge", "-p", patch)
	c.waitCopy(t, "example-settings", "hello after the leader went", 60*time.Second-time.Since(began))
	t.Logf("leader %s deleted, gone after %s; the change landed downstream %s after the deletion; new leader %s",
		leader, gone.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond), c.leader(t))
}
