package cli

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/courier-dev/courier/pkg/plugin/load"
	"github.com/courier-dev/courier/pkg/plugin/why"
)

func (a *app) whyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "why ROW | OWNER CLUSTER SOURCE",
		Short: "Explain one copy: its phase, what to do, versions, who delivers it, Events",
		Long: `Explains one downstreamcopies row, named by its name or by its owner
(a HelmOp, or bundle:<name>), Cluster and source ([Kind/]name): its phase
and message, what to do (from the table of docs/troubleshooting.md), the
source's resourceVersion against the copy's, who delivers it (the
DELIVERED-BY column of kubectl get dcp -o wide), whether Courier reaches
the Cluster, and the last Events about it.`,
		Example: `  kubectl courier why example.downstream-2.secret.example-credentials -n fleet-default
  kubectl courier why example downstream-2 Secret/example-credentials -n fleet-default`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 3 {
				return errors.New("give a row's name, or OWNER CLUSTER SOURCE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			t := why.Target{}
			if len(args) == 1 {
				t.Row = args[0]
			} else {
				owner, err := load.ParseOwner(args[0])
				if err != nil {
					return err
				}
				t = why.Target{Owner: owner, Cluster: args[1], Source: args[2]}
			}
			ns, err := a.namespace(false)
			if err != nil {
				return err
			}
			src, err := a.clients()
			if err != nil {
				return err
			}
			f, err := why.Gather(cmd.Context(), src, ns, t)
			if err != nil {
				return err
			}
			return why.Render(a.streams.Out, f, time.Now())
		},
	}
}
