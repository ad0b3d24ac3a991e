package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/internal/flags"
)

// cli carries what every command needs. Commands write to stdout and
// stderr, never to os.Stdout directly, so tests can capture their output.
type cli struct {
	logger hclog.Logger
	stdout io.Writer
	stderr io.Writer

	logLevel, logFormat string
	// cmd is the command being run (for messages); started is set once
	// its own code runs, so an error before that is a usage error.
	cmd     *cobra.Command
	started bool
}

// usageError is a mistake on the command line: exit code 2, one line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// path names the command that failed, for error lines.
func (c *cli) path(root *cobra.Command) string {
	if c.cmd != nil {
		return c.cmd.CommandPath()
	}
	return root.Name()
}

// root builds the command tree.
func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "fleetbench",
		Short: "benchmark LLM serving stacks with many concurrent multi-turn sessions",
		Long: "fleetbench drives many concurrent, multi-turn chat sessions against an OpenAI-compatible\n" +
			"endpoint (or its built-in simulator), spread over a fleet of agents, and compares routing\n" +
			"modes with exact, fleet-wide percentiles merged from HDR histograms.",
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("a command is required (%s)", strings.Join(commandNames(cmd), ", "))
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			c.cmd = cmd
			if err := c.setUpLogger(); err != nil {
				return err
			}
			c.started = true
			return nil
		},
	}
	root.SetVersionTemplate("fleetbench {{.Version}}\n")
	root.PersistentFlags().StringVar(&c.logLevel, "log-level", envOr("FLEETBENCH_LOG_LEVEL", "info"), "log level: trace, debug, info, warn, error")
	root.PersistentFlags().StringVar(&c.logFormat, "log-format", envOr("FLEETBENCH_LOG_FORMAT", "text"), "log format: text or json")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		c.cmd = cmd
		return &usageError{err: err}
	})
	root.SetUsageFunc(groupedUsage)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		out := cmd.OutOrStdout()
		if d := cmd.Long; d != "" {
			fmt.Fprintf(out, "%s\n\n", d)
		} else if d := cmd.Short; d != "" {
			fmt.Fprintf(out, "%s\n\n", d)
		}
		_ = groupedUsage(cmd)
	})
	root.AddCommand(
		c.runCmd(), c.sweepCmd(), c.reportCmd(), c.simCmd(), c.coordinatorCmd(), c.agentCmd(), c.probeCmd(), c.fetchCmd(),
		&cobra.Command{
			Use: "version", Short: "print the version", Args: noArgs,
			RunE: func(*cobra.Command, []string) error {
				fmt.Fprintf(c.stdout, "fleetbench %s\n", version)
				return nil
			},
		},
	)
	return root
}

// setUpLogger builds the root logger from the global flags.
func (c *cli) setUpLogger() error {
	lvl := hclog.LevelFromString(c.logLevel)
	if lvl == hclog.NoLevel {
		return usagef("--log-level %q: want trace, debug, info, warn or error", c.logLevel)
	}
	if !strings.EqualFold(c.logFormat, "text") && !strings.EqualFold(c.logFormat, "json") {
		return usagef("--log-format %q: want text or json", c.logFormat)
	}
	c.logger = hclog.New(&hclog.LoggerOptions{
		Name:       "fleetbench",
		Level:      lvl,
		Output:     c.stderr,
		JSONFormat: strings.EqualFold(c.logFormat, "json"),
	})
	return nil
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usagef("unknown command %q (commands: %s)", args[0], strings.Join(commandNames(cmd), ", "))
		}
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

func commandNames(cmd *cobra.Command) []string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}

// groupedUsage prints a command's usage with its flags in help groups
// (internal/flags), then its examples.
func groupedUsage(cmd *cobra.Command) error {
	out := cmd.OutOrStdout()
	use := cmd.UseLine()
	if cmd.HasAvailableSubCommands() {
		use = cmd.CommandPath() + " [global flags] <command> [flags]"
	}
	fmt.Fprintf(out, "Usage:\n  %s\n", use)
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(out, "\nCommands:\n")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(out, "  %-12s %s\n", sub.Name(), sub.Short)
			}
		}
	}
	if cmd.Example != "" {
		fmt.Fprintf(out, "\nExamples:\n%s\n", cmd.Example)
	}
	byGroup := map[string]*pflag.FlagSet{}
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		g := flags.GroupOf(f)
		if byGroup[g] == nil {
			byGroup[g] = pflag.NewFlagSet(g, pflag.ContinueOnError)
		}
		byGroup[g].AddFlag(f)
	})
	for _, g := range flags.Groups {
		if fs := byGroup[g]; fs != nil {
			name := g
			if g == flags.GroupOther && len(byGroup) == 1 {
				name = "Flags"
			} else {
				name += " flags"
			}
			fmt.Fprintf(out, "\n%s:\n%s", name, fs.FlagUsagesWrapped(100))
		}
	}
	if cmd.HasAvailableInheritedFlags() {
		fmt.Fprintf(out, "\nGlobal flags:\n%s", cmd.InheritedFlags().FlagUsagesWrapped(100))
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(out, "\nRun '%s <command> -h' for a command's flags.\n", cmd.CommandPath())
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
