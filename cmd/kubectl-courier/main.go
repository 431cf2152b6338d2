// Command kubectl-courier is the kubectl plugin of Courier: `kubectl
// courier status`, `rollout status`, `why` and `report -o html`
// (docs/kubectl-courier.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/courier-dev/courier/pkg/plugin/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Streams{Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
