package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-dev/courier/pkg/sharding"
	"github.com/courier-dev/courier/test/localenv"
)

// restTarget is the most upstream writes per second a replica at rest may
// cost (docs/design.md#scale-out: nothing at rest).
const restTarget = 1.0

// restResult is the upstream's write rate at rest: without Courier (the
// environment's own: kube-controller-manager and kube-apiserver Leases)
// and with 1 and with scaleOutReplicas fresh replicas, each over one
// window after they settled.
type restResult struct {
	window time.Duration
	// base is the rate without Courier; rate the rate with, by replica
	// count; by the same's largest writes by verb and resource, counted
	// over the window.
	base float64
	rate map[int]float64
	by   map[int]string
}

// testRest measures what Courier costs the upstream when nothing
// changes: the upstream kube-apiserver's apiserver_request_total for the
// verbs that write (upstreamWrites: token and access reviews, which store
// nothing, and requests proxied to Courier left out) grows over a window of COURIER_BENCH_REST_SECONDS (60) with no Courier
// running, then with one fresh replica, then with three sharing the
// buckets, each once every bucket has a holder and holders stopped
// moving. Courier's rate is the difference to the rate without it. It
// runs on whatever Clusters the cases before it left (none when run
// alone): at rest, the count of Clusters changes nothing.
func testRest(t *testing.T) {
	window := time.Duration(intsFromEnv(t, "COURIER_BENCH_REST_SECONDS", []int{60})[0]) * time.Second
	courier.Stop()
	var running []*localenv.Courier
	stop := func() {
		for _, c := range running {
			c.Stop()
		}
		running = nil
	}
	t.Cleanup(func() {
		stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := courier.Start(ctx); err != nil {
			t.Errorf("restarting the suite's Courier: %v", err)
		}
	})
	res := restResult{window: window, rate: map[int]float64{}, by: map[int]string{}}
	res.base, _ = writesAtRest(t, window)
	t.Logf("without Courier: %.2f upstream writes/s", res.base)
	for _, n := range []int{1, scaleOutReplicas} {
		stop()
		running = startReplicas(t, n)
		waitBucketsSettled(t, running)
		rate, by := writesAtRest(t, window)
		res.rate[n], res.by[n] = rate, by
		t.Logf("%d replicas at rest: %.2f upstream writes/s (%s)", n, rate, by)
	}
	results.addRest(res)
}

// startReplicas starts n fresh replicas (a single process for 1).
func startReplicas(t *testing.T, n int) []*localenv.Courier {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := localenv.CourierOptions{Binary: courier.Binary(), Args: benchCourierArgs()}
	if n == 1 {
		c, err := env.StartCourier(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return []*localenv.Courier{c}
	}
	cs, _, err := env.StartCourierReplicas(ctx, o, n)
	if err != nil {
		t.Fatalf("starting %d replicas: %v", n, err)
	}
	return cs
}

// waitBucketsSettled waits until the replicas together hold every bucket
// and what each holds has not changed over five scrapes two seconds
// apart, then one lease duration more, so that the window sees no
// hand-over.
func waitBucketsSettled(t *testing.T, cs []*localenv.Courier) {
	var last string
	stable := 0
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var held []string
		total := 0.0
		for _, c := range cs {
			m, err := scrapeFrom(ctx, c.Config)
			if err != nil {
				return false, nil
			}
			v := m.sum("courier_shard_buckets_held")
			total += v
			held = append(held, fmt.Sprint(v))
		}
		cur := strings.Join(held, ",")
		if total != sharding.DefaultBuckets || cur != last {
			last, stable = cur, 0
			return false, nil
		}
		stable++
		return stable >= 5, nil
	})
	if err != nil {
		t.Fatalf("buckets held by the replicas did not settle at %d (last: %s)", sharding.DefaultBuckets, last)
	}
	time.Sleep(sharding.DefaultLeaseDuration)
}

// writesAtRest returns the upstream's writes per second over window
// (upstreamWrites: reviews and requests proxied to Courier left out) and
// the largest by verb and resource, as counts over the window.
func writesAtRest(t *testing.T, window time.Duration) (float64, string) {
	ctx := context.Background()
	before, err := scrapeFrom(ctx, env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	time.Sleep(window)
	after, err := scrapeFrom(ctx, env.Upstream.Config)
	if err != nil {
		t.Fatal(err)
	}
	total, by := upstreamWrites(before, after)
	return total / time.Since(start).Seconds(), by
}

func (r *report) addRest(res restResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rest = append(r.rest, res)
}

// printRest writes the at-rest table: Courier's upstream writes per
// second (the upstream's rate with it less the rate without), in all and
// per replica, against the target per replica.
func printRest(w io.Writer, rows []restResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "at rest: Courier's upstream writes/s\t1 replica\t%d replicas\tper replica (%d)\ttarget per replica\tverdict\n", scaleOutReplicas, scaleOutReplicas)
	for _, r := range rows {
		one, many := r.rate[1]-r.base, r.rate[scaleOutReplicas]-r.base
		per := many / scaleOutReplicas
		fmt.Fprintf(tw, "%s window, %.2f/s without Courier\t%.2f\t%.2f\t%.2f\t<= %.1f\t%s\n", r.window, r.base, one, many, per,
			restTarget, verdict(one <= restTarget && per <= restTarget))
	}
	tw.Flush()
	for _, r := range rows {
		fmt.Fprintf(w, "at rest, upstream writes in the window by verb and resource (with Courier): 1 replica: %s; %d replicas: %s\n",
			r.by[1], scaleOutReplicas, r.by[scaleOutReplicas])
	}
}
