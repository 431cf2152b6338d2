package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/courier-dev/courier/pkg/plugin/grid"
	"github.com/courier-dev/courier/pkg/plugin/report"
)

func (a *app) reportCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "report -o html",
		Short: "One self-contained HTML page: owners, grids coloured by phase, copies not ready",
		Long: `Writes one HTML page to stdout that opens from a file with no network: the
owners, each owner's Clusters x sources grid coloured by phase, the copies
not ready grouped by cause, and when it was taken. It reads one list of
downstreamcopysummaries and one of downstreamcopies.`,
		Example: `  kubectl courier report -o html -A > report.html`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "html" {
				return fmt.Errorf("report supports -o html only, got %q", output)
			}
			ns, err := a.namespace(true)
			if err != nil {
				return err
			}
			src, err := a.clients()
			if err != nil {
				return err
			}
			taken := time.Now()
			sums, err := src.ListSummaries(cmd.Context(), ns)
			if err != nil {
				return err
			}
			rows, err := src.ListRows(cmd.Context(), ns, fields.Everything())
			if err != nil {
				return err
			}
			return report.Write(a.streams.Out, report.Input{Taken: taken, Where: a.where(ns), Summaries: sums, Grids: grid.Build(rows)})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: html")
	return cmd
}

// where says which cluster and namespace were read, for the report.
func (a *app) where(ns string) string {
	ctx := ""
	if raw, err := a.config.ToRawKubeConfigLoader().RawConfig(); err == nil {
		ctx = raw.CurrentContext
	}
	if a.config.Context != nil && *a.config.Context != "" {
		ctx = *a.config.Context
	}
	if ns == "" {
		return fmt.Sprintf("context %q, every namespace", ctx)
	}
	return fmt.Sprintf("context %q, namespace %s", ctx, ns)
}
