package cli

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/courier-dev/courier/pkg/plugin/load"
	"github.com/courier-dev/courier/pkg/plugin/rollout"
)

func (a *app) rolloutCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Wait for an owner's copies",
	}
	var o rollout.Options
	status := &cobra.Command{
		Use:   "status OWNER",
		Short: "Wait until every copy of OWNER is synced at its sources' current versions",
		Long: `Waits, as kubectl rollout status does, until the owner's summary is Ready:
every copy synced at its source's current resourceVersion. It reads the
summary by name (a GET, then a watch pinned to the name), which the view
floors with the sources' live resourceVersions: started right after a
source was written, it never returns on the state before that write.

On a terminal it draws a progress bar; otherwise it prints a line each
time the counts change. Exits 0 when Ready; 1, naming the rows, when a
copy has been Conflict, Forbidden, Denied, Invalid or Unreachable for
--fail-after, or at --timeout.`,
		Example: `  kubectl apply -f rotated-secret.yaml && kubectl courier rollout status example -n fleet-default --timeout 5m`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.FailAfter < 0 {
				return errors.New("--fail-after must not be negative")
			}
			owner, err := load.ParseOwner(args[0])
			if err != nil {
				return err
			}
			_, redraw, width, err := a.tty()
			if err != nil {
				return err
			}
			ns, err := a.namespace(false)
			if err != nil {
				return err
			}
			src, err := a.clients()
			if err != nil {
				return err
			}
			var p rollout.Progress = &rollout.Lines{Out: a.streams.Out, Owner: owner}
			if redraw {
				p = &rollout.Bar{Out: a.streams.Out, Owner: owner, Width: width}
			}
			return rollout.Wait(cmd.Context(), src, ns, owner, o, p)
		},
	}
	status.Flags().DurationVar(&o.Timeout, "timeout", 0, "How long to wait before giving up; 0 waits without limit")
	status.Flags().DurationVar(&o.FailAfter, "fail-after", time.Minute, "Fail once a copy has been Conflict, Forbidden, Denied, Invalid or Unreachable this long")
	cmd.AddCommand(status)
	return cmd
}
