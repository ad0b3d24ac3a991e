// Command fleetbench benchmarks OpenAI-compatible LLM serving stacks with
// many concurrent multi-turn sessions, spread over a fleet of agents, and
// compares routing modes (KV-aware against round-robin) with exact,
// fleet-wide percentiles.
//
// main stays thin: it builds the root logger, ties the process to SIGINT and
// SIGTERM, dispatches to one command and maps its error to an exit code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/hashicorp/go-hclog"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// errUsage marks a usage mistake; the command has already printed why.
var errUsage = errors.New("usage")

// cli carries what every command needs. Commands must not write to
// os.Stdout directly so tests can capture their output.
type cli struct {
	logger hclog.Logger
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(c *cli, ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"run", "drive one concurrency level against a target and print the result", (*cli).cmdRun},
		{"sim", "serve the built-in inference simulator", (*cli).cmdSim},
		{"coordinator", "run the coordinator that shards sessions across agents", (*cli).cmdCoordinator},
		{"agent", "run an agent that takes sessions from a coordinator", (*cli).cmdAgent},
		{"sweep", "run a sweep of levels x routing modes x runs and write reports", (*cli).cmdSweep},
		{"probe", "measure which readiness signal of a starting server can be trusted", (*cli).cmdProbe},
		{"report", "re-render reports from sweep output directories or TSV files", (*cli).cmdReport},
		{"version", "print the version", (*cli).cmdVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, stop, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain parses the global flags, runs one command and returns the exit
// code. After the first signal cancels ctx, stop restores default signal
// handling so a second signal ends the process at once.
func runMain(ctx context.Context, stop func(), args []string, stdout, stderr io.Writer) int {
	load.TuneGC()
	fs := flag.NewFlagSet("fleetbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	level := fs.String("log-level", envOr("FLEETBENCH_LOG_LEVEL", "info"), "log level: trace, debug, info, warn, error")
	format := fs.String("log-format", envOr("FLEETBENCH_LOG_FORMAT", "text"), "log format: text or json")
	fs.Usage = func() { usage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		usage(stderr, fs)
		return exitUsage
	}
	lvl := hclog.LevelFromString(*level)
	if lvl == hclog.NoLevel {
		fmt.Fprintf(stderr, "fleetbench: --log-level %q: want trace, debug, info, warn or error\n", *level)
		return exitUsage
	}
	if !strings.EqualFold(*format, "text") && !strings.EqualFold(*format, "json") {
		fmt.Fprintf(stderr, "fleetbench: --log-format %q: want text or json\n", *format)
		return exitUsage
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "fleetbench",
		Level:      lvl,
		Output:     stderr,
		JSONFormat: strings.EqualFold(*format, "json"),
	})
	c := &cli{logger: logger, stdout: stdout, stderr: stderr}

	name, rest := fs.Arg(0), fs.Args()[1:]
	for _, cmd := range commands() {
		if cmd.name != name {
			continue
		}
		// Restore default signal handling on the first signal; the
		// callback is unregistered when the command returns.
		unregister := context.AfterFunc(ctx, stop)
		err := cmd.run(c, ctx, rest)
		unregister()
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.Is(err, errUsage):
			return exitUsage
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			logger.Info("interrupted")
			return exitInterrupted
		default:
			fmt.Fprintf(stderr, "fleetbench %s: %v\n", name, err)
			return exitError
		}
	}
	fmt.Fprintf(stderr, "fleetbench: unknown command %q\n\n", name)
	usage(stderr, fs)
	return exitUsage
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: fleetbench [global flags] <command> [flags]\n\ncommands:\n")
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, "\nglobal flags:\n")
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nRun 'fleetbench <command> -h' for a command's flags.\n")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (c *cli) cmdVersion(_ context.Context, _ []string) error {
	fmt.Fprintf(c.stdout, "fleetbench %s\n", version)
	return nil
}
