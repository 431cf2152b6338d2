package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// TestOptionsFromFlags parses command lines the way main does and runs
// Complete and Validate, which is where a missing registration (a feature
// gate, a flag) shows up before any server starts.
func TestOptionsFromFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults with a kubeconfig", args: []string{"--kubeconfig=" + kubeconfig}},
		{name: "json logging is not compiled in", args: []string{"--logging-format=json"}, wantErr: "Unsupported log format"},
		{name: "verbosity", args: []string{"--kubeconfig=" + kubeconfig, "-v=4"}},
		{name: "port out of range", args: []string{"--secure-port=70000"}, wantErr: "secure-port"},
		{name: "leader election tuned", args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=5s"}},
		{name: "lease shorter than renew deadline", args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect-lease-duration=5s"}, wantErr: "--leader-elect-lease-duration (5s) must be greater than --leader-elect-renew-deadline (10s)"},
		{name: "renew deadline too close to retry period", args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect-retry-period=9s"}, wantErr: "--leader-elect-renew-deadline (10s) must be greater than 1.2 x --leader-elect-retry-period (9s)"},
		{name: "configmap locks are gone", args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect-resource-lock=configmaps"}, wantErr: `--leader-elect-resource-lock must be "leases"`},
		{name: "sharding tuned", args: []string{"--kubeconfig=" + kubeconfig, "--shard-identity=courier-0", "--shard-buckets=16", "--shard-lease-duration=6s", "--shard-renew-deadline=4s", "--shard-renew-period=2s", "--shard-retry-period=1s"}},
		{name: "sharding off ignores its tuning", args: []string{"--kubeconfig=" + kubeconfig, "--shard-buckets=0", "--shard-lease-duration=1s"}},
		{name: "shard lease not above renew deadline", args: []string{"--kubeconfig=" + kubeconfig, "--shard-identity=a", "--shard-lease-duration=10s"}, wantErr: "lease duration (10s) must be greater than the renew deadline (10s)"},
		{name: "shard renew deadline too close to renew period", args: []string{"--kubeconfig=" + kubeconfig, "--shard-identity=a", "--shard-renew-period=9s"}, wantErr: "renew deadline (10s) must be greater than the renew period (9s) plus the retry period (2s)"},
		{name: "shard lease in whole seconds", args: []string{"--kubeconfig=" + kubeconfig, "--shard-identity=a", "--shard-lease-duration=15500ms"}, wantErr: "whole number of seconds"},
		{name: "shard identity makes a Lease name", args: []string{"--kubeconfig=" + kubeconfig, "--shard-identity=Courier_0"}, wantErr: "does not make a valid Lease name"},
		{name: "negative buckets", args: []string{"--kubeconfig=" + kubeconfig, "--shard-buckets=-1"}, wantErr: "--shard-buckets must be 0 (off) or between 1 and 1024"},
		{name: "too many buckets", args: []string{"--kubeconfig=" + kubeconfig, "--shard-identity=a", "--shard-buckets=2000"}, wantErr: "buckets must be between 1 and 1024"},
		{name: "leader election off ignores its tuning", args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--leader-elect-lease-duration=1s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions(io.Discard, io.Discard)
			cmd := NewCommand(context.Background(), o)
			cmd.SetOut(io.Discard)
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := o.Complete()
			if err == nil {
				err = o.Validate()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// TestWatchListCompressionOffByDefault: Courier's watch-lists are not
// gzipped flush by flush unless the operator turns it back on (init in
// options.go says why).
func TestWatchListCompressionOffByDefault(t *testing.T) {
	o := NewOptions(io.Discard, io.Discard)
	cmd := NewCommand(context.Background(), o)
	if err := cmd.Flags().Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.WatchListCompression) {
		t.Error("WatchListCompression is on by default")
	}
	// The positive control: the generic server's other compression stays.
	if !utilfeature.DefaultFeatureGate.Enabled(features.APIResponseCompression) {
		t.Error("APIResponseCompression is off: lists lost their compression too")
	}
}

// TestServingWithRoutine: a watch is served from a shallow goroutine by
// default (init in options.go says why), but not under an audit policy
// unless the operator names the gate, and never against what they named.
func TestServingWithRoutine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{name: "default", want: true},
		{name: "audit policy", args: []string{"--audit-policy-file=/etc/courier/audit.yaml"}, want: false},
		{name: "audit policy, gate named on", args: []string{"--audit-policy-file=/etc/courier/audit.yaml", "--feature-gates=APIServingWithRoutine=true"}, want: true},
		{name: "gate named off", args: []string{"--feature-gates=APIServingWithRoutine=false"}, want: false},
		{name: "audit log without a policy", args: []string{"--audit-log-path=/var/log/courier-audit.log"}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() {
				if err := utilfeature.DefaultMutableFeatureGate.ResetFeatureValueToDefault(features.APIServingWithRoutine); err != nil {
					t.Error(err)
				}
			})
			o := NewOptions(io.Discard, io.Discard)
			cmd := NewCommand(context.Background(), o)
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			if got := utilfeature.DefaultFeatureGate.Enabled(features.APIServingWithRoutine); got != tc.want {
				t.Errorf("APIServingWithRoutine = %t, want %t", got, tc.want)
			}
		})
	}
}
