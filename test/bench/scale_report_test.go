package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/courier-dev/courier/test/fleetsim"
)

// Issue 11's targets. Ratios are Courier / baseline, measured side by side
// in the same run.
const (
	targetCopiesRatio = 0.8  // copies/s after a change of every source: at least
	targetLastRatio   = 1.25 // time to the last copy of one source change: at most
	targetCreateRatio = 0.7  // creates/s of a new HelmOp: at least
	targetRSSMiB      = 1024 // RSS holding the copies: at most
	targetIdleCores   = 0.05 // idle CPU holding them: at most
	targetListRatio   = 1.0  // time per list of the rows / of ConfigMaps: at most
)

// scaleRow is one line of the table: a figure at one N, Courier's value,
// the baseline's (or "-"), the figure checked against the target, the
// target and the verdict.
type scaleRow struct {
	n                 int
	figure            string
	courier, baseline string
	checked, target   string
	pass              bool
}

// ratioRow compares courier / baseline with a target that is a lower bound
// (atLeast) or an upper bound.
func ratioRow(n int, figure, courier, baseline string, c, b, target float64, atLeast bool) scaleRow {
	row := scaleRow{n: n, figure: figure, courier: courier, baseline: baseline, checked: ratio(c, b)}
	if b == 0 {
		return row
	}
	v := c / b
	if atLeast {
		row.target, row.pass = fmt.Sprintf(">= %.2g", target), v >= target
	} else {
		row.target, row.pass = fmt.Sprintf("<= %.3g", target), v <= target
	}
	return row
}

func printScale(w io.Writer, rows []scaleRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tfigure\tcourier\tbaseline\tchecked\ttarget\tverdict")
	for _, r := range rows {
		verdict := "FAIL"
		if r.pass {
			verdict = "PASS"
		}
		if r.target == "" {
			verdict = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.n, r.figure, r.courier, r.baseline, r.checked, r.target, verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "baseline: a client-go pool of %d workers (Courier's copy workers) for copies; the kube-apiserver listing ConfigMaps for lists.\n", poolWorkers())
	if poolPlainMetadata() {
		fmt.Fprintln(w, "DIAGNOSTIC RUN: the pool's copies carry one label, not the shape of Courier's (COURIER_BENCH_POOL_METADATA=plain); these are not the acceptance figures.")
	}
	if poolWithCourierClient() {
		fmt.Fprintln(w, "DIAGNOSTIC RUN: the pool's clients are built as Courier's downstream clients are (COURIER_BENCH_POOL_CLIENT); these are not the acceptance figures.")
	}
	fmt.Fprintln(w, "checked: courier / baseline where there is a baseline, else Courier's own figure. Times are medians over the rounds, copies/s totals over them.")
}

// report adds this N's rows and notes to the results.
func (s *scaleRun) report() {
	n, perOp := s.l.n, s.l.n*sourcesPerOp
	all := [2]*roundStats{s.stat(sideCourier, kindAll), s.stat(sidePool, kindAll)}
	one := [2]*roundStats{s.stat(sideCourier, kindOne), s.stat(sidePool, kindOne)}
	cps := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	dur := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	createRate := func(side string) float64 { return float64(perOp) / fleetsim.MaxDuration(s.create[side]).Seconds() }

	rows := []scaleRow{
		ratioRow(n, fmt.Sprintf("copies/s, one change of every source (%d copies)", perOp),
			cps(all[0].copiesPerSecond()), cps(all[1].copiesPerSecond()), all[0].copiesPerSecond(), all[1].copiesPerSecond(), targetCopiesRatio, true),
		ratioRow(n, fmt.Sprintf("time to the last copy, one change of one source (%d copies)", n),
			dur(one[0].medianMakespan()), dur(one[1].medianMakespan()), float64(one[0].medianMakespan()), float64(one[1].medianMakespan()), targetLastRatio, false),
		ratioRow(n, fmt.Sprintf("creates/s, a new HelmOp (%d copies, %d namespaces)", perOp, n),
			cps(createRate(sideCourier)), cps(createRate(sidePool)), createRate(sideCourier), createRate(sidePool), targetCreateRatio, true),
		{n: n, figure: fmt.Sprintf("RSS holding %d Clusters x %d copies", n, sourcesPerOp), courier: fmt.Sprintf("%.0f MiB", float64(s.rss)/(1<<20)),
			baseline: "-", checked: fmt.Sprintf("%.0f MiB", float64(s.rss)/(1<<20)), target: fmt.Sprintf("<= %d MiB", targetRSSMiB),
			pass: float64(s.rss)/(1<<20) <= targetRSSMiB},
		{n: n, figure: fmt.Sprintf("idle CPU holding them (%s)", s.idleFor), courier: fmt.Sprintf("%.3f cores", s.idleCPU),
			baseline: "-", checked: fmt.Sprintf("%.3f", s.idleCPU), target: fmt.Sprintf("<= %.2f", targetIdleCores), pass: s.idleCPU <= targetIdleCores},
	}
	if ls := s.listing; ls != nil {
		rows = append(rows, ratioRow(n, fmt.Sprintf("time per list, %d rows (aggregator) vs %d ConfigMaps", ls.items, ls.items),
			dur(ls.rowMedian), dur(ls.cmMedian), float64(ls.rowMedian), float64(ls.cmMedian), targetListRatio, false))
	}
	results.addScale(rows...)

	for _, st := range []*roundStats{all[0], all[1], one[0], one[1]} {
		results.note("N=%d, %s, %s: %d measurements; time to the last copy of each %s; per-copy latency p50 %s, p99 %s (nearest rank over %d copies)",
			n, st.side, st.kind, len(st.makespans), durations(st.makespans), ms(st.p50()), ms(st.p99()), len(st.latencies))
	}
	results.note("N=%d, new HelmOp: time to the last of %d copies: courier %s (from the HelmOp's create: clients and informers per Cluster, namespaces, copies), "+
		"pool %s (from the start of its run: clients from the kubeconfigs, GET of the sources, %d namespaces, %d creates); per-copy p50 courier %s, pool %s",
		n, perOp, dur(fleetsim.MaxDuration(s.create[sideCourier])), dur(fleetsim.MaxDuration(s.create[sidePool])), n, perOp,
		ms(fleetsim.Percentile(s.create[sideCourier], 50)), ms(fleetsim.Percentile(s.create[sidePool], 50)))
	for _, kind := range []string{"new HelmOp", kindAll, kindOne} {
		cw := s.diag[kind]
		if cw == nil {
			continue
		}
		copies, mean := perOp, meanDuration(s.create[sideCourier])
		switch kind {
		case kindAll:
			mean = meanDuration(all[0].latencies)
		case kindOne:
			copies, mean = n, meanDuration(one[0].latencies)
		}
		results.note("%s", cw.text(n, kind, copies, mean))
	}
	if s.notQuiet > 0 {
		results.note("N=%d: %d measurements started with the machine still busy (over %.1f cores for %s)", n, s.notQuiet, quietCores, quietMax)
	}
	for _, k := range []string{kindAll, kindOne} {
		for _, side := range []string{sideCourier, sidePool} {
			if sc := s.spans[side+"/"+k]; sc != nil {
				results.note("%s", sc.text(n, side, k))
			}
		}
	}
	poolRounds := len(all[1].makespans) + len(one[1].makespans)
	if poolRounds > 0 {
		results.note("N=%d: Courier used %s of CPU per pool round (it watches every Secret upstream as metadata, the pool's sources too)",
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
