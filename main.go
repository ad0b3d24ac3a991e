// Command fleetbench benchmarks OpenAI-compatible LLM serving stacks with
// many concurrent multi-turn sessions, spread over a fleet of agents, and
// compares routing modes (KV-aware against round-robin) with exact,
// fleet-wide percentiles.
//
// main stays thin: it ties the process to SIGINT and SIGTERM, runs the
// command line (cli.go) and maps its error to an exit code. Each
// cmd_<name>.go binds one command's flags and calls a package.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/result"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes, documented in the README.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitThresholds: the run completed and its result is saved, but a
	// --threshold failed.
	exitThresholds = flags.ExitThresholds
	// exitAllFailed: every request failed (the result is saved), or a
	// stage measured no request at all.
	exitAllFailed   = 4
	exitInterrupted = 130
)

// reserveLoopProcs is set in a real process: its load commands give the
// client's event loops Ps of their own (client.ReserveLoopProcs), which
// in-process tests, sharing one scheduler, must not do.
var reserveLoopProcs bool

func main() {
	reserveLoopProcs = true
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, stop, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain runs one command line and returns the exit code. After the
// first signal cancels ctx, stop restores default signal handling so a
// second signal ends the process at once.
func runMain(ctx context.Context, stop func(), args []string, stdout, stderr io.Writer) int {
	load.TuneGC()
	c := &cli{stdout: stdout, stderr: stderr}
	root := c.root() //nolint:contextcheck // cobra hands ctx to every RunE as cmd.Context(), from ExecuteContext below
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	unregister := context.AfterFunc(ctx, stop)
	defer unregister()
	err := root.ExecuteContext(ctx)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue) || !c.started:
		// Flag and argument mistakes, whether cobra or the command found
		// them: one line, and where to read more.
		fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", c.path(root), err, c.path(root))
		return exitUsage
	case errorsAs[*result.ThresholdError](err):
		fmt.Fprintf(stderr, "%s: %v\n", c.path(root), err)
		return exitThresholds
	case errors.Is(err, fleet.ErrAllFailed), errors.Is(err, fleet.ErrNothingMeasured):
		fmt.Fprintf(stderr, "%s: %v\n", c.path(root), err)
		return exitAllFailed
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		if c.logger != nil {
			c.logger.Info("interrupted")
		}
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "%s: %v\n", c.path(root), err)
		return exitError
	}
}

// errorsAs reports whether err's chain holds a T.
func errorsAs[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}
