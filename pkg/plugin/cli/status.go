package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/courier-dev/courier/pkg/plugin/grid"
	"github.com/courier-dev/courier/pkg/plugin/load"
	"github.com/courier-dev/courier/pkg/plugin/status"
)

func (a *app) statusCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "status [OWNER]",
		Short: "One line per owner, or one owner's Clusters x sources matrix",
		Long: `Without OWNER: one line per owner (a HelmOp, or bundle:<name> for a Bundle)
with Clusters ready, copies synced and failing, from one list of
downstreamcopysummaries.

With OWNER: its Clusters x sources matrix, one character per copy (see the
legend), and the copies not ready grouped by cause, from one GET of its
summary and one list of its rows. Beyond 60 Clusters only those not ready
are drawn (--all draws every one); Clusters are set side by side to fill
the terminal's width.`,
		Example: `  kubectl courier status -A
  kubectl courier status example -n fleet-default
  kubectl courier status bundle:web --all`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			color, _, width, err := a.tty()
			if err != nil {
				return err
			}
			src, err := a.clients()
			if err != nil {
				return err
			}
			o := status.Options{Width: width, Color: color, All: all, AllNamespaces: a.allNamespaces}
			if len(args) == 0 {
				ns, err := a.namespace(true)
				if err != nil {
					return err
				}
				sums, err := src.ListSummaries(cmd.Context(), ns)
				if err != nil {
					return err
				}
				return status.Owners(a.streams.Out, sums, ns, o)
			}
			if a.allNamespaces {
				return errors.New("status OWNER reads one namespace: use -n, not -A")
			}
			owner, err := load.ParseOwner(args[0])
			if err != nil {
				return err
			}
			ns, err := a.namespace(false)
			if err != nil {
				return err
			}
			s, err := src.GetSummary(cmd.Context(), ns, owner.SummaryName())
			if errors.Is(err, load.ErrNotFound) {
				return fmt.Errorf("%s has no copies in namespace %s (no downstreamcopysummary %q; kubectl courier status -n %s lists the owners)",
					owner, ns, owner.SummaryName(), ns)
			}
			if err != nil {
				return err
			}
			rows, err := src.ListRows(cmd.Context(), ns, owner.Rows())
			if err != nil {
				return err
			}
			grids := grid.Build(rows)
			if len(grids) == 0 {
				return fmt.Errorf("%s has no rows in namespace %s any more", owner, ns)
			}
			return status.Owner(a.streams.Out, s, grids[0], o)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "Draw every Cluster of a large matrix, ready ones included")
	return cmd
}
