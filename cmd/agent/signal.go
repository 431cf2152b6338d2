package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// shutdownSignals end the agent: SIGTERM is what the kubelet sends a Pod
// it stops, SIGINT is Ctrl-C.
var shutdownSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// signalContext returns a context cancelled on the first shutdown signal,
// so that the agent stops its work and releases its leader Lease; a
// second signal exits at once with status 1. It is the agent's own, not
// the API server library's, so that the agent links nothing of an API
// server (pkg/importrules).
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 2)
	signal.Notify(c, shutdownSignals...)
	go func() {
		<-c
		cancel()
		<-c
		os.Exit(1)
	}()
	return ctx
}
