package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/courier-dev/courier/test/fleetsim"
)

// The scale benchmark's targets. Ratios are Courier / baseline, measured side by side
// in the same run.
const (
	targetCopiesRatio = 0.8  // copies/s after a change of every source: at least
	targetLastRatio   = 1.25 // time to the last copy of one source change: at most
	targetCreateRatio = 0.7  // creates/s of a new HelmOp: at least
	targetRSSMiB      = 1024 // RSS holding the copies: at most
	targetIdleCores   = 0.05 // idle CPU holding them: at most
	targetListRatio   = 1.0  // time per list of the rows / of ConfigMaps: at most
)

// scaleRow is one line of the table: a figure at one N, its target,
// Courier's value and, for each baseline, its value, the ratio Courier /
// baseline and the verdict. A figure with no baseline (RSS, idle CPU) has
// one check against Courier's own value; the list figure has one
// baseline, the kube-apiserver listing ConfigMaps.
type scaleRow struct {
	n       int
	figure  string
	target  string
	courier string
	checks  []check
}

// check is one baseline's column group in a row.
type check struct {
	baseline string // the baseline's value, "-" when none
	checked  string // courier / baseline, or Courier's own figure
	pass     bool
	judged   bool // there is a target to judge by
}

// ratioCheck compares courier / baseline with a target that is a lower
// bound (atLeast) or an upper bound.
func ratioCheck(baseline string, c, b, target float64, atLeast bool) check {
	ch := check{baseline: baseline, checked: ratioAgainst(c, b, target)}
	if b == 0 {
		return ch
	}
	v := c / b
	ch.judged = true
	if atLeast {
		ch.pass = v >= target
	} else {
		ch.pass = v <= target
	}
	return ch
}

func targetText(target float64, atLeast bool) string {
	if atLeast {
		return fmt.Sprintf(">= %.2g", target)
	}
	return fmt.Sprintf("<= %.3g", target)
}

func (c check) verdict() string {
	switch {
	case !c.judged:
		return "-"
	case c.pass:
		return "PASS"
	}
	return "FAIL"
}

func printScale(w io.Writer, rows []scaleRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tfigure\ttarget\tcourier\tplain loop\tvs plain loop\tverdict\tsame-shape pool\tvs same-shape pool\tverdict")
	for _, r := range rows {
		cells := []string{fmt.Sprint(r.n), r.figure, r.target, r.courier}
		for i := range 2 {
			if i < len(r.checks) {
				c := r.checks[i]
				cells = append(cells, c.baseline, c.checked, c.verdict())
			} else {
				cells = append(cells, "-", "-", "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	fmt.Fprintf(w, "baselines: plain loop = %d client-go workers (Courier's copy workers) writing one-label copies, the judge; "+
		"same-shape pool = the same loop writing copies with a frozen fixture of Courier's labels and annotations. "+
		"For lists the baseline (first group) is the kube-apiserver listing as many ConfigMaps of the same size; RSS and idle CPU are Courier's own.\n", poolWorkers())
	if poolWithCourierClient() {
		fmt.Fprintln(w, "DIAGNOSTIC RUN: the pools' clients are built as Courier's downstream clients are (COURIER_BENCH_POOL_CLIENT); these are not the acceptance figures.")
	}
	fmt.Fprintln(w, "vs: courier / baseline. Times to the last copy are medians over the rounds; copies/s and creates/s totals over the rounds or samples.")
}

// report adds this N's rows and notes to the results.
func (s *scaleRun) report() {
	n, perOp := s.l.n, s.l.n*sourcesPerOp
	cps := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	dur := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	all, one := s.stat(sideCourier, kindAll), s.stat(sideCourier, kindOne)
	create := s.create[sideCourier]

	var rows []scaleRow
	{
		r := scaleRow{n: n, figure: fmt.Sprintf("copies/s, one change of every source (%d copies)", perOp),
			target: targetText(targetCopiesRatio, true), courier: cps(all.copiesPerSecond())}
		for _, b := range baselines {
			st := s.stat(b, kindAll)
			r.checks = append(r.checks, ratioCheck(cps(st.copiesPerSecond()), all.copiesPerSecond(), st.copiesPerSecond(), targetCopiesRatio, true))
		}
		rows = append(rows, r)
	}
	{
		r := scaleRow{n: n, figure: fmt.Sprintf("time to the last copy, one change of one source (%d copies)", n),
			target: targetText(targetLastRatio, false), courier: dur(one.medianMakespan())}
		for _, b := range baselines {
			st := s.stat(b, kindOne)
			r.checks = append(r.checks, ratioCheck(dur(st.medianMakespan()), float64(one.medianMakespan()), float64(st.medianMakespan()), targetLastRatio, false))
		}
		rows = append(rows, r)
	}
	{
		r := scaleRow{n: n, figure: fmt.Sprintf("creates/s, a new HelmOp (%d copies, %d namespaces; %d samples)", perOp, n, len(create.makespans)),
			target: targetText(targetCreateRatio, true), courier: cps(create.copiesPerSecond())}
		for _, b := range baselines {
			st := s.create[b]
			r.checks = append(r.checks, ratioCheck(cps(st.copiesPerSecond()), create.copiesPerSecond(), st.copiesPerSecond(), targetCreateRatio, true))
		}
		rows = append(rows, r)
	}
	rssMiB := float64(s.rss) / (1 << 20)
	rows = append(rows,
		scaleRow{n: n, figure: fmt.Sprintf("RSS holding %d Clusters x %d copies", n, sourcesPerOp), target: fmt.Sprintf("<= %d MiB", targetRSSMiB),
			courier: fmt.Sprintf("%.0f MiB", rssMiB), checks: []check{{baseline: "-", checked: fmt.Sprintf("%.0f MiB", rssMiB), judged: true, pass: rssMiB <= targetRSSMiB}}},
		scaleRow{n: n, figure: fmt.Sprintf("idle CPU holding them (%s)", s.idleFor), target: fmt.Sprintf("<= %.2f cores", targetIdleCores),
			courier: fmt.Sprintf("%.3f cores", s.idleCPU), checks: []check{{baseline: "-", checked: fmt.Sprintf("%.3f", s.idleCPU), judged: true, pass: s.idleCPU <= targetIdleCores}}})
	if ls := s.listing; ls != nil {
		rows = append(rows, scaleRow{n: n, figure: fmt.Sprintf("time per list, %d rows (aggregator) vs %d ConfigMaps", ls.items, ls.items),
			target: targetText(targetListRatio, false), courier: dur(ls.rowMedian),
			checks: []check{ratioCheck(dur(ls.cmMedian), float64(ls.rowMedian), float64(ls.cmMedian), targetListRatio, false)}})
	}
	results.addScale(rows...)

	if s.shape != "" {
		results.note("%s", s.shape)
	}
	for _, kind := range []string{kindAll, kindOne} {
		if pairs := s.ready[kind]; len(pairs) > 0 {
			results.note("%s", readyNote(n, kind, pairs))
		}
	}
	for _, kind := range []string{kindAll, kindOne} {
		for _, side := range sides {
			st := s.stat(side, kind)
			results.note("N=%d, %s, %s: %d measurements; time to the last copy of each %s; per-copy latency p50 %s, p99 %s (nearest rank over %d copies)",
				n, side, kind, len(st.makespans), durations(st.makespans), ms(st.p50()), ms(st.p99()), len(st.latencies))
		}
	}
	k := len(create.makespans)
	results.note("N=%d, new HelmOp, %d samples per side (sample 1 cold on every side, later ones warm: Courier keeps a Cluster's client and informers, "+
		"the pools their clientsets; order Courier, plain, shape in odd samples, reversed in even ones): time to the last of %d copies per sample: "+
		"courier %s (from the HelmOp's create: namespaces, copies), plain %s, shape %s (from the start of their run: GET of the sources, %d namespaces, %d creates); "+
		"per-copy p50 courier %s, plain %s, shape %s",
		n, k, perOp, durations(create.makespans), durations(s.create[sidePlain].makespans), durations(s.create[sideShape].makespans), n, perOp,
		ms(create.p50()), ms(s.create[sidePlain].p50()), ms(s.create[sideShape].p50()))
	for _, kind := range []string{"new HelmOp", kindAll, kindOne} {
		cw := s.diag[kind]
		if cw == nil {
			continue
		}
		copies, mean := perOp, meanDuration(create.latencies)
		switch kind {
		case kindAll:
			mean = meanDuration(all.latencies)
		case kindOne:
			copies, mean = n, meanDuration(one.latencies)
		}
		results.note("%s", cw.text(n, kind, copies, mean))
	}
	if s.notQuiet > 0 {
		results.note("N=%d: %d measurements started with the machine still busy (over %.1f cores for %s)", n, s.notQuiet, quietCores, quietMax)
	}
	if s.settleWaits > 0 {
		results.note("N=%d: %d measurements waited for kube-controller-manager to settle the destination namespaces first, %s in all",
			n, s.settleWaits, s.settled.Round(time.Second))
	}
	for _, k := range []string{kindAll, kindOne} {
		for _, side := range sides {
			if sc := s.spans[side+"/"+k]; sc != nil {
				results.note("%s", sc.text(n, side, k))
			}
		}
	}
	poolRounds := 0
	for _, b := range baselines {
		poolRounds += len(s.stat(b, kindAll).makespans) + len(s.stat(b, kindOne).makespans)
	}
	if poolRounds > 0 {
		results.note("N=%d: Courier used %s of CPU per pool round (it watches every Secret upstream as metadata, the pools' sources too)",
			n, (s.poolCPU / time.Duration(poolRounds)).Round(10*time.Millisecond))
	}
	results.note("N=%d, holding: RSS %.1f MiB (largest of 5 samples), Go heap in use %.1f MiB; CPU %.3f cores over %s",
		n, float64(s.rss)/(1<<20), s.heap/(1<<20), s.idleCPU, s.idleFor)
	if ls := s.listing; ls != nil {
		results.note("N=%d, lists (JSON, unpaged, %d timed each, alternating, after one untimed): %s through the aggregator, %d bytes, times %s; "+
			"/api/v1/namespaces/%s/configmaps, %d bytes, times %s; the %d ConfigMaps took %s to create; "+
			"the rows straight from Courier (no aggregator; after the others): median %s, times %s; asked for gzip: %s",
			n, listRepeats, ls.rowPath, ls.rowBytes, durations(ls.rowTimes), ls.configMapNS, ls.cmBytes, durations(ls.cmTimes), ls.items,
			ls.setup.Round(100*time.Millisecond), dur(fleetsim.Percentile(ls.directTimes, 50)), durations(ls.directTimes), ls.wire)
	}
}

func durations(ds []time.Duration) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += " "
		}
		out += d.Round(time.Millisecond).String()
	}
	return out
}

func meanDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total / time.Duration(len(ds))
}
