//go:build linux

// Command pause is the sandbox ("pause") image of the node suite's
// containerd (`make test-node`, docs/design.md#tests-against-real-servers): containerd's CRI plugin needs
// its sandbox image locally, and the suite never pulls, so it builds this
// static program and packages it as an OCI archive itself (test/node).
//
// Like Kubernetes' own pause it holds a Pod's namespaces open and does
// nothing else: it reaps the children it inherits as PID 1 and exits 0 on
// SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap waits for every child that has exited, without blocking.
func reap() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
