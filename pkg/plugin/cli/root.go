// Package cli is the command line of kubectl-courier: cobra commands on
// cli-runtime's ConfigFlags (--kubeconfig, --context, -n, ...), so the
// plugin reaches whatever `kubectl get dcp` reaches. Each command reads
// through pkg/plugin/load and draws with its own package.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-dev/courier/pkg/generated/clientset/versioned"
	"github.com/courier-dev/courier/pkg/plugin/load"
)

// Streams are where a command writes.
type Streams struct {
	Out, ErrOut io.Writer
}

// app holds what every command shares.
type app struct {
	streams       Streams
	config        *genericclioptions.ConfigFlags
	allNamespaces bool
	color         string
	width         int
	// source replaces the API clients in tests.
	source load.Source
}

// NewRoot returns the kubectl-courier command.
func NewRoot(streams Streams) *cobra.Command { return newRoot(streams, nil) }

// newRoot returns the command reading from src (the API when nil).
func newRoot(streams Streams, src load.Source) *cobra.Command {
	a := &app{streams: streams, config: genericclioptions.NewConfigFlags(true), source: src}
	root := &cobra.Command{
		Use:   "kubectl-courier",
		Short: "Where Courier's copies stand: status, rollout status, why, report",
		Long: `kubectl courier shows where every copy Courier makes stands, from its
downstreamcopies rows and downstreamcopysummaries (docs/kubectl-courier.md).`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl courier"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	a.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().BoolVarP(&a.allNamespaces, "all-namespaces", "A", false, "Every namespace (status and report)")
	root.PersistentFlags().StringVar(&a.color, "color", "auto", "Colours: auto (on a terminal only), always or never")
	root.PersistentFlags().IntVar(&a.width, "width", 0, "Columns to draw in (default: the terminal's, else $COLUMNS, else 80)")
	root.AddCommand(a.statusCmd(), a.rolloutCmd(), a.whyCmd(), a.reportCmd())
	return root
}

// Main runs the command line and returns the exit code: 0, or 1 with the
// error on stderr.
func Main(ctx context.Context, args []string, streams Streams) int {
	root := NewRoot(streams)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(streams.ErrOut, "error:", err)
		return 1
	}
	return 0
}

// clients returns the source of the API, made from the flags.
func (a *app) clients() (load.Source, error) {
	if a.source != nil {
		return a.source, nil
	}
	cfg, err := a.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return load.Clients{Courier: c, Kube: k}, nil
}

// namespace is the namespace to read: "" with -A, else -n or the
// kubeconfig context's.
func (a *app) namespace(allowAll bool) (string, error) {
	if allowAll && a.allNamespaces {
		return "", nil
	}
	ns, _, err := a.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// terminal reports whether w is a terminal.
func terminal(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0, true
	}
	return width, true
}

// tty says whether to colour and redraw, and the width to draw in.
func (a *app) tty() (color bool, redraw bool, width int, err error) {
	w, isTTY := terminal(a.streams.Out)
	switch a.color {
	case "auto":
		color = isTTY && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	case "always":
		color = true
	case "never":
	default:
		return false, false, 0, fmt.Errorf("--color must be auto, always or never, not %q", a.color)
	}
	switch {
	case a.width < 0:
		return false, false, 0, fmt.Errorf("--width must be positive, got %d", a.width)
	case a.width > 0:
		width = a.width
	case w > 0:
		width = w
	default:
		if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
			width = c
		} else {
			width = 80
		}
	}
	return color, isTTY && os.Getenv("TERM") != "dumb", width, nil
}
