package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// rssBytes reads VmRSS from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) {
	m, err := procMemory(pid)
	return m.rss, err
}

// procMem is a process's resident memory: all of it (VmRSS), and the part
// that is pages of mapped files (RssFile: for Courier, its own binary's
// text and read-only data, the same on every replica whatever it holds).
type procMem struct{ rss, file int64 }

// procMemory reads VmRSS and RssFile from /proc/<pid>/status.
func procMemory(pid int) (procMem, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, err
	}
	defer f.Close()
	var m procMem
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssFile:": &m.file}
	found := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, _ := strings.Cut(s.Text(), "\t")
		dst, ok := fields[name]
		if !ok {
			continue
		}
		v := strings.Fields(rest) // "123456 kB"
		if len(v) != 2 || v[1] != "kB" {
			return procMem{}, fmt.Errorf("unexpected %s line %q", name, s.Text())
		}
		kb, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return procMem{}, err
		}
		*dst = kb << 10
		found++
	}
	if err := s.Err(); err != nil {
		return procMem{}, err
	}
	if found != len(fields) {
		return procMem{}, fmt.Errorf("no VmRSS or RssFile in /proc/%d/status", pid)
	}
	return m, nil
}

// cpuTime is the user plus system CPU time a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields after it start with field 3 (state).
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// waitIdle waits until the process used at most 20 ms of CPU in a 500 ms
// window (so one scenario does not start while Courier still works on the
// previous one), or max passes.
func waitIdle(t *testing.T, pid int, max time.Duration) {
	t.Helper()
	deadline := time.Now().Add(max)
	prev, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		cur, err := cpuTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		if cur-prev <= 20*time.Millisecond {
			return
		}
		prev = cur
	}
	t.Logf("Courier was still busy after %s; going on", max)
}

// metrics is one scrape of Courier's /metrics: series ("name{labels}") to
// value.
type metrics map[string]float64

// scrape reads Courier's /metrics directly (not through the aggregator),
// as the upstream admin, whom Courier authorizes through the upstream
// SubjectAccessReview.
func scrape(ctx context.Context) (metrics, error) {
	return scrapeFrom(ctx, courier.Config)
}

// scrapeDownstreams reads the /metrics of every downstream kube-apiserver
// and adds them up.
func scrapeDownstreams(ctx context.Context) (metrics, error) {
	total := metrics{}
	for _, ds := range env.Downstreams {
		m, err := scrapeFrom(ctx, ds.Config)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ds.Name, err)
		}
		total.add(metrics{}, m)
	}
	return total, nil
}

// scrapeFrom reads and parses cfg.Host's /metrics.
func scrapeFrom(ctx context.Context, cfg *rest.Config) (metrics, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	hc.Timeout = 30 * time.Second
	req, err := newGet(ctx, cfg.Host+"/metrics")
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	m := metrics{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, nil
}

// sum adds the values of the series of metric name whose labels contain
// every one of labels (each written as `key="value"`).
func (m metrics) sum(name string, labels ...string) float64 {
	var total float64
	for series, v := range m {
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// requests sums apiserver_request_total by verb and resource (with
// subresource), leaving out zeros, e.g. "GET secrets 50": the limit
// largest (all when limit is 0).
func (m metrics) requests(limit int) string {
	by := map[string]float64{}
	for series, v := range m {
		name, labels, _ := strings.Cut(series, "{")
		if name != "apiserver_request_total" || v == 0 {
			continue
		}
		verb, resource, sub := label(labels, "verb"), label(labels, "resource"), label(labels, "subresource")
		switch {
		case resource == "": // a non-resource URL such as /apis, in subresource
			resource = sub
		case sub != "":
			resource += "/" + sub
		}
		by[verb+" "+resource] += v
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return by[keys[i]] > by[keys[j]] || by[keys[i]] == by[keys[j]] && keys[i] < keys[j]
	})
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	var out []string
	for _, k := range keys {
		v := strconv.FormatFloat(by[k], 'f', 1, 64) // means over windows
		out = append(out, k+" "+strings.TrimSuffix(v, ".0"))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// label returns the value of key in a `k1="v1",k2="v2"}` label list.
func label(labels, key string) string {
	i := strings.Index(labels, key+`="`)
	if i < 0 || (i > 0 && labels[i-1] != ',') {
		return ""
	}
	v := labels[i+len(key)+2:]
	if j := strings.IndexByte(v, '"'); j >= 0 {
		return v[:j]
	}
	return ""
}

// scale divides every value by d.
func (m metrics) scale(d float64) metrics {
	out := metrics{}
	for k, v := range m {
		out[k] = v / d
	}
	return out
}

// add accumulates after - before into m, series by series.
func (m metrics) add(before, after metrics) {
	for k, v := range after {
		m[k] += v - before[k]
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100).
// intsFromEnv reads a comma-separated list of positive integers from the
// environment variable name, or returns def when it is unset.
func intsFromEnv(t *testing.T, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want positive integers separated by commas", name, v)
		}
		out = append(out, n)
	}
	return out
}
