package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/courier-dev/courier/test/fleetsim"
)

// listRepeats is how many timed lists each side gets (median reported).
const listRepeats = 7

// listResult compares listing the workspace's DownstreamCopy rows through
// the aggregator with listing as many ConfigMaps of the same serialized
// size straight from the kube-apiserver.
type listResult struct {
	items             int
	rowBytes, cmBytes int // body size of one list
	rowTimes, cmTimes []time.Duration
	// directTimes are lists of the rows from Courier itself, not through
	// the aggregator (a diagnostic: what the aggregator's hop adds).
	directTimes []time.Duration
	// wire says how each list arrived when the client asks for gzip
	// itself (Content-Encoding and bytes on the wire): whether the
	// aggregator passes Courier's compression through.
	wire                 string
	rowMedian, cmMedian  time.Duration
	setup                time.Duration // creating the ConfigMaps
	rowPath, configMapNS string
}

// list measures listing N x 10 rows (one unpaged GET, JSON, through the
// upstream kube-apiserver's aggregator to Courier) against listing N x 10
// ConfigMaps whose JSON is the same size per item (one unpaged GET, JSON,
// served by the same kube-apiserver), alternating, after one untimed list
// of each; the ConfigMaps (kube-root-ca.crt and N x 10 - 1 of
// ours) are created first, in a namespace of their own
// upstream, and Courier is let go idle after them (it watches ConfigMaps
// as metadata). Then, as a diagnostic, the same list of rows straight
// from Courier.
func (s *scaleRun) list() {
	t, ctx, l := s.t, context.Background(), s.l
	hc, err := rest.HTTPClientFor(env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 5 * time.Minute
	base := env.Upstream.Config.Host
	res := &listResult{items: l.n * sourcesPerOp, configMapNS: l.listNS(),
		rowPath: "/apis/courier.dev/v1alpha1/namespaces/" + l.workspace() + "/downstreamcopies"}
	cmPath := "/api/v1/namespaces/" + l.listNS() + "/configmaps"

	rows, err := getBody(ctx, hc, base+res.rowPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := countItems(t, rows); got != res.items {
		t.Fatalf("listed %d rows, want %d", got, res.items)
	}
	perRow := len(rows) / res.items

	// The size of a ConfigMap item with an empty pad: the list of one
	// such ConfigMap less the list of none.
	up := fastUpstream(t)
	if _, err := up.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.listNS()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-controller-manager puts kube-root-ca.crt in every namespace:
	// it is one of the items listed, so one ConfigMap fewer is created.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := up.CoreV1().ConfigMaps(l.listNS()).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("kube-root-ca.crt never appeared in %s", l.listNS())
	}
	empty, err := getBody(ctx, hc, base+cmPath)
	if err != nil {
		t.Fatal(err)
	}
	cmName := func(i int) string { return fmt.Sprintf("cm-%05d", i) }
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName(0)}, Data: map[string]string{"pad": ""}}
	if _, err := up.CoreV1().ConfigMaps(l.listNS()).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one, err := getBody(ctx, hc, base+cmPath)
	if err != nil {
		t.Fatal(err)
	}
	// One item's size besides its pad, and the list envelope's.
	itemOverhead := len(one) - len(empty)
	pad := strings.Repeat("x", max(perRow-itemOverhead, 0))
	began := time.Now()
	if err := up.CoreV1().ConfigMaps(l.listNS()).Delete(ctx, cmName(0), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = fleetsim.Parallel(res.items-1, setupWorkers, func(i int) error {
		_, err := up.CoreV1().ConfigMaps(l.listNS()).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName(i)},
			Data: map[string]string{"pad": pad}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating ConfigMaps: %v", err)
	}
	res.setup = time.Since(began)
	waitIdle(t, s.pid, l.budget())

	var cms []byte
	for i := -1; i < listRepeats; i++ { // i = -1: the untimed warm-up
		order := []bool{true, false} // rows first, then the other way round
		if i%2 != 0 {
			order = []bool{false, true}
		}
		for _, isRows := range order {
			path := base + cmPath
			if isRows {
				path = base + res.rowPath
			}
			t0 := time.Now()
			body, err := getBody(ctx, hc, path)
			d := time.Since(t0)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case isRows:
				rows = body
				if i >= 0 {
					res.rowTimes = append(res.rowTimes, d)
				}
			default:
				cms = body
				if i >= 0 {
					res.cmTimes = append(res.cmTimes, d)
				}
			}
		}
	}
	direct, err := rest.HTTPClientFor(courier.Config)
	if err != nil {
		t.Fatal(err)
	}
	direct.Timeout = hc.Timeout
	for i := -1; i < listRepeats; i++ {
		t0 := time.Now()
		if _, err := getBody(ctx, direct, courier.Config.Host+res.rowPath); err != nil {
			t.Fatal(err)
		}
		if i >= 0 {
			res.directTimes = append(res.directTimes, time.Since(t0))
		}
	}
	res.wire = fmt.Sprintf("through the aggregator %s; ConfigMaps %s; straight from Courier %s",
		wireEncoding(ctx, t, hc, base+res.rowPath), wireEncoding(ctx, t, hc, base+cmPath), wireEncoding(ctx, t, direct, courier.Config.Host+res.rowPath))
	if got := countItems(t, cms); got != res.items {
		t.Fatalf("listed %d ConfigMaps, want %d", got, res.items)
	}
	res.rowBytes, res.cmBytes = len(rows), len(cms)
	res.rowMedian, res.cmMedian = fleetsim.Percentile(res.rowTimes, 50), fleetsim.Percentile(res.cmTimes, 50)
	s.listing = res
	t.Logf("N=%d list of %d: rows %s (%d bytes), ConfigMaps %s (%d bytes)", l.n, res.items, res.rowMedian, res.rowBytes, res.cmMedian, res.cmBytes)
}

// getBody GETs url as JSON and reads the whole body.
func getBody(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := newGet(ctx, url)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	return body, nil
}

// countItems is the length of a list's items.
func countItems(t *testing.T, body []byte) int {
	t.Helper()
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("decoding a list: %v", err)
	}
	return len(list.Items)
}

// wireEncoding GETs url as JSON asking for gzip itself, so that Go's
// transport hands over the body as it came, and describes it.
func wireEncoding(ctx context.Context, t *testing.T, hc *http.Client, url string) string {
	req, err := newGet(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	enc := resp.Header.Get("Content-Encoding")
	if enc == "" {
		enc = "identity"
	}
	return fmt.Sprintf("%s, %d bytes on the wire, %s", enc, n, resp.Proto)
}
