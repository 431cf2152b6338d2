package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/courier-dev/courier/pkg/apis/courier/v1alpha1"
	"github.com/courier-dev/courier/pkg/generated/clientset/versioned/scheme"
	"github.com/courier-dev/courier/pkg/plugin/grid"
	"github.com/courier-dev/courier/pkg/plugin/load"
	"github.com/courier-dev/courier/pkg/plugin/status"
)

func (a *app) statusCmd() *cobra.Command {
	var all bool
	var output string
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
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("status supports -o json or -o yaml (or no -o for text), not %q", output)
			}
			src, err := a.clients()
			if err != nil {
				return err
			}
			o := status.Options{Width: width, Color: color, All: all, AllNamespaces: a.allNamespaces}
			if len(args) == 0 {
				return a.owners(cmd.Context(), src, output, o)
			}
			return a.owner(cmd.Context(), src, args[0], output, o)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "Draw every Cluster of a large matrix, ready ones included")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: the summaries (or OWNER's summary) as the API returns them")
	return cmd
}

// owners writes one line per owner.
func (a *app) owners(ctx context.Context, src load.Source, output string, o status.Options) error {
	ns, err := a.namespace(true)
	if err != nil {
		return err
	}
	sums, err := src.ListSummaries(ctx, ns)
	if err != nil {
		return err
	}
	if output != "" {
		return printObject(a.streams.Out, output, &v1alpha1.DownstreamCopySummaryList{Items: sums})
	}
	return status.Owners(a.streams.Out, sums, ns, o)
}

// owner writes one owner's matrix: one GET of its summary (floored), one
// list of its rows.
func (a *app) owner(ctx context.Context, src load.Source, arg, output string, o status.Options) error {
	if a.allNamespaces {
		return errors.New("status OWNER reads one namespace: use -n, not -A")
	}
	owner, err := load.ParseOwner(arg)
	if err != nil {
		return err
	}
	ns, err := a.namespace(false)
	if err != nil {
		return err
	}
	s, err := src.GetSummary(ctx, ns, owner.SummaryName())
	if errors.Is(err, load.ErrNotFound) {
		return fmt.Errorf("%s has no copies in namespace %s (no downstreamcopysummary %q; kubectl courier status -n %s lists the owners)",
			owner, ns, owner.SummaryName(), ns)
	}
	if err != nil {
		return err
	}
	if output != "" {
		return printObject(a.streams.Out, output, s)
	}
	rows, err := src.ListRows(ctx, ns, owner.Rows())
	if err != nil {
		return err
	}
	grids := grid.Build(rows)
	if len(grids) == 0 {
		return fmt.Errorf("%s has no rows in namespace %s any more", owner, ns)
	}
	return status.Owner(a.streams.Out, s, grids[0], o)
}

// printObject writes obj as JSON or YAML, with its apiVersion and kind.
func printObject(w io.Writer, format string, obj runtime.Object) error {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	data, err := json.MarshalIndent(obj, "", "    ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}
