// Command courier-agent pulls a Fleet Cluster's copies from Courier into
// the cluster it runs in (docs/design.md#pull-delivery).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/courier-dev/courier/pkg/agent/app"
)

func main() {
	ctx := signalContext()
	os.Exit(cli.Run(app.NewCommand(ctx, app.NewOptions())))
}
