package sharding

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := Config{Namespace: "courier-system", Identity: "courier-7d9f8b6c4-x2x9z"}
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   []string // substrings, one per expected error
	}{
		{name: "defaults", change: func(*Config) {}},
		{name: "test timings", change: func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RenewPeriod, c.RetryPeriod = 6*time.Second, 4*time.Second, 2*time.Second, time.Second
		}},
		{name: "no namespace", change: func(c *Config) { c.Namespace = "" }, want: []string{"namespace"}},
		{name: "no identity", change: func(c *Config) { c.Identity = "" }, want: []string{"identity must not be empty"}},
		{name: "identity not a name", change: func(c *Config) { c.Identity = "Courier_0" }, want: []string{"valid Lease name"}},
		{name: "too many buckets", change: func(c *Config) { c.Buckets = 5000 }, want: []string{"between 1 and 1024"}},
		{name: "negative buckets", change: func(c *Config) { c.Buckets = -1 }, want: []string{"between 1 and 1024"}},
		{name: "lease in fractions of a second", change: func(c *Config) { c.LeaseDuration = 15500 * time.Millisecond },
			want: []string{"whole number of seconds"}},
		{name: "lease not longer than the deadline", change: func(c *Config) { c.LeaseDuration = 10 * time.Second },
			want: []string{"greater than the renew deadline"}},
		{name: "no retry before the deadline", change: func(c *Config) { c.RenewPeriod = 9 * time.Second },
			want: []string{"renew period (9s) plus the retry period"}},
		{name: "negative period", change: func(c *Config) { c.RetryPeriod = -time.Second },
			want: []string{"must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			errs := c.Validate()
			if len(errs) != len(tc.want) {
				t.Fatalf("Validate() = %v, want %d errors %v", errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to say %q", i, errs[i], w)
				}
			}
		})
	}
}

func TestNewRefusesAnInvalidConfig(t *testing.T) {
	if _, err := newManager(newFakeLeases(), Config{}); err == nil {
		t.Error("newManager accepted an empty Config")
	}
}
