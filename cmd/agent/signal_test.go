package main

import (
	"syscall"
	"testing"
	"time"
)

// TestSignalContext: the first SIGTERM cancels the context (the second,
// which exits the process, is not sent here).
func TestSignalContext(t *testing.T) {
	ctx := signalContext()
	if err := ctx.Err(); err != nil {
		t.Fatalf("the context is done before any signal: %v", err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
}
