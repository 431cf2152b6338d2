package retry

import (
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 30 * time.Second, Jitter: 0.5, MaxRetryAfter: time.Minute}
	for _, tc := range []struct {
		name       string
		failures   int
		retryAfter time.Duration
		sample     float64
		want       time.Duration
	}{
		{"first failure, no jitter drawn", 1, 0, 0, time.Second},
		{"first failure, most jitter", 1, 0, 0.999, time.Second + 499500*time.Microsecond},
		{"doubles", 3, 0, 0, 4 * time.Second},
		{"doubles with jitter", 3, 0, 0.5, 5 * time.Second},
		{"capped at Max", 10, 0, 0, 30 * time.Second},
		{"capped at Max, many failures (no overflow)", 1000, 0, 0, 30 * time.Second},
		{"capped at Max plus jitter", 10, 0, 0.5, 37500 * time.Millisecond},
		{"Retry-After above the step wins", 1, 32 * time.Second, 0, 32 * time.Second},
		{"Retry-After plus its jitter", 1, 32 * time.Second, 0.5, 40 * time.Second},
		{"Retry-After below the step: the step", 4, 2 * time.Second, 0, 8 * time.Second},
		{"Retry-After bounded by MaxRetryAfter", 1, time.Hour, 0, time.Minute},
		{"sample out of range is clamped", 1, 0, 7, 1500 * time.Millisecond},
		{"negative sample is clamped", 1, 0, -1, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := b.Delay(tc.failures, tc.retryAfter, tc.sample); got != tc.want {
				t.Errorf("Delay(%d, %s, %v) = %s, want %s", tc.failures, tc.retryAfter, tc.sample, got, tc.want)
			}
		})
	}
}

// TestBackoffDelayNeverBelowRetryAfter: whatever the sample and the run of
// failures, the wait is at least the Retry-After (up to MaxRetryAfter).
func TestBackoffDelayNeverBelowRetryAfter(t *testing.T) {
	b := DefaultBackoff
	for failures := 1; failures <= 12; failures++ {
		for _, ra := range []time.Duration{0, time.Second, 32 * time.Second, 5 * time.Minute} {
			for _, s := range []float64{0, 0.1, 0.5, 0.999} {
				if got := b.Delay(failures, ra, s); got < ra {
					t.Errorf("Delay(%d, %s, %v) = %s, below the Retry-After", failures, ra, s, got)
				}
			}
		}
	}
}

func TestBackoffJitterSpreads(t *testing.T) {
	b := DefaultBackoff
	low, high := b.Delay(1, 32*time.Second, 0), b.Delay(1, 32*time.Second, 0.999)
	if high-low < 15*time.Second {
		t.Errorf("agents told Retry-After: 32 come back within %s of each other, want them spread over about 16 s", high-low)
	}
}

func TestInitialDelay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		sample float64
		want   time.Duration
	}{
		{"no window", 0, 0.5, 0},
		{"negative window", -time.Second, 0.5, 0},
		{"start of the window", 10 * time.Second, 0, 0},
		{"middle", 10 * time.Second, 0.5, 5 * time.Second},
		{"end stays inside", 10 * time.Second, 1, 10*time.Second - 1},
		{"sample above 1 stays inside", 10 * time.Second, 3, 10*time.Second - 1},
		{"negative sample", 10 * time.Second, -3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InitialDelay(tc.window, tc.sample); got != tc.want {
				t.Errorf("InitialDelay(%s, %v) = %s, want %s", tc.window, tc.sample, got, tc.want)
			}
		})
	}
}
