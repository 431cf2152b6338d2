package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// spanCost is what one round cost the whole machine, measured the same
// way for both sides over the same span: from the start of the source
// updates to the round's last copy seen downstream. The rounds run on
// kube-apiservers that share two cores with Courier, etcd and the
// benchmark, so a side's time follows what everyone spends in its span.
type spanCost struct {
	rounds  int
	machine time.Duration // every process's CPU (/proc/stat)
	courier time.Duration // Courier's
	bench   time.Duration // this process's: the pool's clients and the arrival watcher
	// puts and putSeconds are the downstream kube-apiservers' PUT secrets
	// requests in the span and their server-side duration
	// (apiserver_request_duration_seconds), whoever sent them.
	puts, putSeconds float64
	// procs is the CPU of every process that used any in the span, by
	// processLabel.
	procs map[string]time.Duration
	// before is the machine's CPU in the limiterRefill wait before the
	// span: what the previous measurement left running.
	before time.Duration
}

// openSpan is a span's state at its start.
type openSpan struct {
	machine, courier, bench time.Duration
	procs                   map[string]time.Duration
	d                       metrics
	failed                  bool
	before                  time.Duration
}

// beginSpan starts a span with the downstream metrics of win, the
// window opened before the wait that precedes it; quietFrom is the
// machine's CPU when that wait began.
func (s *scaleRun) beginSpan(win openWindow, quietFrom time.Duration) openSpan {
	o := openSpan{d: win.d, failed: win.failed}
	o.procs = processCPU()
	o.machine, o.courier, o.bench = s.cpuNow()
	o.before = o.machine - quietFrom
	return o
}

// endSpan adds the span that began at o to side and kind's total.
func (s *scaleRun) endSpan(o openSpan, side, kind string) {
	machine, courier, bench := s.cpuNow()
	procs := processCPU()
	d, err := scrapeDownstreams(context.Background())
	if o.failed || err != nil || machine == 0 {
		s.t.Logf("span: no figures for this %s %s round: %v", side, kind, err)
		return
	}
	if s.spans == nil {
		s.spans = map[string]*spanCost{}
	}
	sc := s.spans[side+"/"+kind]
	if sc == nil {
		sc = &spanCost{procs: map[string]time.Duration{}}
		s.spans[side+"/"+kind] = sc
	}
	sc.rounds++
	sc.machine += machine - o.machine
	sc.courier += courier - o.courier
	sc.bench += bench - o.bench
	sc.before += o.before
	for k, v := range procs {
		if v > o.procs[k] {
			sc.procs[k] += v - o.procs[k]
		}
	}
	delta := metrics{}
	delta.add(o.d, d)
	put := []string{`verb="PUT"`, `resource="secrets"`}
	sc.puts += delta.sum("apiserver_request_duration_seconds_count", put...)
	sc.putSeconds += delta.sum("apiserver_request_duration_seconds_sum", put...)
}

// cpuNow reads the machine's, Courier's and this process's CPU time so
// far; machine is 0 when /proc/stat cannot be read.
func (s *scaleRun) cpuNow() (machine, courier, bench time.Duration) {
	machine, _ = machineCPU()
	courier, _ = cpuTime(s.pid)
	bench, _ = cpuTime(os.Getpid())
	return machine, courier, bench
}

// machineCPU is the CPU time every processor has spent busy so far: the
// first line of /proc/stat, all but idle and iowait.
func machineCPU() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var busy int64
	for i, v := range f[1:8] { // user nice system idle iowait irq softirq
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	if len(f) > 8 { // steal
		if n, err := strconv.ParseInt(f[8], 10, 64); err == nil {
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// text is the mean per round.
func (sc *spanCost) text(n int, side, kind string) string {
	per := func(d time.Duration) string {
		return (d / time.Duration(sc.rounds)).Round(10 * time.Millisecond).String()
	}
	server := "-"
	if sc.puts > 0 {
		server = ms(time.Duration(sc.putSeconds / sc.puts * float64(time.Second)))
	}
	keys := make([]string, 0, len(sc.procs))
	for k := range sc.procs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return sc.procs[keys[i]] > sc.procs[keys[j]] })
	var procs []string
	for i, k := range keys {
		if i == 8 {
			break
		}
		procs = append(procs, k+" "+per(sc.procs[k]))
	}
	return fmt.Sprintf("N=%d, %s, %s, per round from the change to the last copy (mean of %d): machine CPU %s (%s in the %s before it), Courier %s, this benchmark (pool, watcher) %s; "+
		"downstream PUT secrets %.0f, mean server-side duration %s; by process: %s", n, side, kind, sc.rounds, per(sc.machine), per(sc.before), limiterRefill, per(sc.courier), per(sc.bench),
		sc.puts/float64(sc.rounds), server, strings.Join(procs, ", "))
}

// processCPU is the CPU time so far of every process on the machine, by
// processLabel.
func processCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		cpu, err := cpuTime(pid)
		if err != nil || cpu == 0 {
			continue
		}
		out[processLabel(pid)] += cpu
	}
	return out
}

// processLabel names a process by its command and the flag that tells
// instances apart (a kube-apiserver's port, an etcd's client URL), with
// its pid.
func processLabel(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return strconv.Itoa(pid)
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	label := filepath.Base(args[0])
	for _, a := range args[1:] {
		for _, flag := range []string{"--secure-port=", "--listen-client-urls=", "--name="} {
			if v, ok := strings.CutPrefix(a, flag); ok {
				label += " " + v
			}
		}
	}
	return fmt.Sprintf("%s[%d]", label, pid)
}

const (
	// quietCores is the machine's CPU use, in cores over quietWindow,
	// below which a measurement may start: the test clusters' background
	// (leases, kube-controller-manager) stays under it.
	quietCores  = 0.3
	quietWindow = 500 * time.Millisecond
	// quietMax bounds the wait: on a machine shared with other work the
	// measurement goes on, and says so.
	quietMax = 10 * time.Second
)

// waitMachineQuiet waits until the whole machine is quiet (quietCores over
// quietWindow), so that a measurement does not start while the
// kube-apiservers, etcd or the garbage collectors still work for the
// previous one, and reports whether it became quiet within quietMax.
func waitMachineQuiet(t *testing.T) bool {
	t.Helper()
	deadline := time.Now().Add(quietMax)
	prev, err := machineCPU()
	if err != nil {
		t.Logf("machine CPU: %v", err)
		return false
	}
	for time.Now().Before(deadline) {
		time.Sleep(quietWindow)
		cur, err := machineCPU()
		if err != nil {
			t.Logf("machine CPU: %v", err)
			return false
		}
		if (cur - prev).Seconds() <= quietCores*quietWindow.Seconds() {
			return true
		}
		prev = cur
	}
	t.Logf("the machine was still busy after %s (more than %.1f cores); going on", quietMax, quietCores)
	return false
}
