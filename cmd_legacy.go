package main

import (
	"context"
	"errors"
	"flag"

	"github.com/spf13/cobra"
)

// errUsage marks a usage mistake a legacy command has already printed.
var errUsage = errors.New("usage")

// legacy wraps a command that still parses its own flags with the standard
// flag package (until it moves to the shared registry).
func (c *cli) legacy(use, short string, run func(c *cli, ctx context.Context, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := run(c, cmd.Context(), args)
			switch {
			case errors.Is(err, flag.ErrHelp):
				return nil
			case errors.Is(err, errUsage):
				return &usageError{err: errors.New("invalid flags")}
			}
			return err
		},
	}
}

func (c *cli) runCmd() *cobra.Command {
	return c.legacy("run", "drive one concurrency level against a target and print the result", (*cli).cmdRun)
}

func (c *cli) sweepCmd() *cobra.Command {
	return c.legacy("sweep", "run a sweep of levels x routing modes x runs and write reports", (*cli).cmdSweep)
}

func (c *cli) coordinatorCmd() *cobra.Command {
	return c.legacy("coordinator", "run the coordinator that shards sessions across agents", (*cli).cmdCoordinator)
}
