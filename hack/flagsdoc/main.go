// Command flagsdoc writes docs/flags.md: every flag of courier-apiserver
// and courier-agent, taken from the flag sets the binaries themselves
// build (server.NewOptions().Flags() and app.NewOptions().Flags(), plus
// --version as both commands add it), so the reference cannot drift from
// the code. `make flags` runs it; its test fails when docs/flags.md is not
// what it would write.
//
//	go run ./hack/flagsdoc -o docs/flags.md
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/version/verflag"

	"github.com/courier-dev/courier/pkg/agent/app"
	"github.com/courier-dev/courier/pkg/cmd/server"
)

func main() {
	out := flag.String("o", "", "file to write (default: standard output)")
	flag.Parse()
	doc := Render()
	if *out == "" {
		os.Stdout.Write(doc)
		return
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// binary is one command and the named flag sets it parses.
type binary struct {
	name, about string
	flags       cliflag.NamedFlagSets
}

// binaries builds each command's flag sets with the constructors its main
// uses. verflag.AddFlags registers --version on a fresh set each time.
func binaries() []binary {
	srv := server.NewOptions(io.Discard, io.Discard).Flags()
	verflag.AddFlags(srv.FlagSet("global"))
	agent := app.NewOptions().Flags()
	verflag.AddFlags(agent.FlagSet("global"))
	return []binary{
		{"courier-apiserver", "the aggregated API server and copy engine (`cmd/apiserver`)", srv},
		{"courier-agent", "the pull agent in a downstream cluster (`cmd/agent`)", agent},
	}
}

// Render returns docs/flags.md.
func Render() []byte {
	var b bytes.Buffer
	b.WriteString(`# Flags

Every flag of both binaries, generated from their own flag sets by
` + "`go run ./hack/flagsdoc -o docs/flags.md`" + ` (` + "`make flags`" + `); a test in
` + "`make test`" + ` fails when this page is out of date. Each description is
the flag's first sentence; ` + "`--help`" + ` prints the whole text. What
Courier's own defaults were chosen for: [design-decisions.md](design-decisions.md).
`)
	for _, bin := range binaries() {
		fmt.Fprintf(&b, "\n## %s\n\n%s.\n", bin.name, capitalize(bin.about))
		for _, set := range courierFirst(bin.flags.Order) {
			fs := bin.flags.FlagSets[set]
			var rows []string
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Hidden || f.Deprecated != "" {
					return
				}
				rows = append(rows, row(f))
			})
			if len(rows) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n### %s: %s flags\n\n| flag | default | description |\n|---|---|---|\n", bin.name, set)
			for _, r := range rows {
				b.WriteString(r)
			}
		}
	}
	return b.Bytes()
}

// courierFirst orders the named flag sets as the binary does, but puts
// the sets every Kubernetes component shares (generic server, logging,
// global) after Courier's own, which are what a reader looks for.
func courierFirst(order []string) []string {
	shared := map[string]bool{"generic": true, "logs": true, "global": true}
	var own, common []string
	for _, name := range order {
		if shared[name] {
			common = append(common, name)
		} else {
			own = append(own, name)
		}
	}
	return append(own, common...)
}

// machineDefaults are the defaults a binary computes from the machine it
// runs on; the page says how, so that it is the same wherever it is
// generated.
var machineDefaults = map[string]string{
	"shard-identity": "$POD_NAME, else the host name",
}

// row is one flag's line of a table.
func row(f *pflag.Flag) string {
	name := "`--" + f.Name + "`"
	if f.Shorthand != "" {
		name = "`-" + f.Shorthand + "`, " + name
	}
	def := ""
	if d, ok := machineDefaults[f.Name]; ok {
		def = cell(d)
	} else if d := f.DefValue; d != "" && d != "[]" && d != "false" && d != "0" && d != "0s" {
		def = "`" + cell(d) + "`"
	}
	return fmt.Sprintf("| %s | %s | %s |\n", name, def, cell(firstSentence(f.Usage)))
}

// firstSentence returns usage up to the end of its first sentence, on one
// line: a period followed by a space and an upper-case letter ends it (so
// "e.g. x", "1.2 s" and a path do not).
func firstSentence(usage string) string {
	s := strings.Join(strings.Fields(usage), " ")
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '.' && s[i+1] == ' ' && s[i+2] >= 'A' && s[i+2] <= 'Z' && !strings.HasSuffix(s[:i], " e.g") && !strings.HasSuffix(s[:i], " i.e") {
			return s[:i+1]
		}
	}
	return s
}

// cell escapes what would end a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
