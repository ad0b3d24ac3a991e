package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/ui"
)

// reportCmd re-renders report.md, baseline.json and the charts from sweep
// output directories or sweep TSV files, averaging several sweeps: rows of
// one (mode, level) from different inputs are treated as runs.
func (c *cli) reportCmd() *cobra.Command {
	var (
		out, baseline, candidate, serve string
		sla, fallback                   time.Duration
		png                             bool
	)
	cmd := &cobra.Command{
		Use:   "report PATH... [flags]",
		Short: "re-render reports from sweep output directories or TSV files",
		Long: "Re-renders report.md, baseline.json and the charts from sweep output directories or\n" +
			"benchmark-sweep-*.tsv files. Several paths are averaged: rows of one mode and level\n" +
			"become runs.",
		Example: "  fleetbench report out/day1 out/day2 out/day3 --out out/combined\n" +
			"  fleetbench report out/demo/benchmark-sweep-*.tsv --sla 300ms --png",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("give at least one sweep output directory or TSV file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if sla < 0 || fallback < 0 {
				return usagef("--sla and --fallback-sla must not be negative")
			}
			if serve != "" {
				if err := flags.CheckListen(serve); err != nil {
					return usagef("--serve %v", err)
				}
			}
			if err := cmd.Context().Err(); err != nil {
				return err
			}
			s, err := report.Load(args...)
			if err != nil {
				return err
			}
			override(&s.SLA, sla)
			override(&s.FallbackSLA, fallback)
			if baseline != "" {
				s.Baseline = baseline
			}
			if candidate != "" {
				s.Candidate = candidate
			}
			r, err := report.Render(out, s, report.Options{PNG: png})
			if err != nil {
				return err
			}
			c.logger.Debug("report rendered", "report", r.Report, "charts", len(r.Charts))
			fmt.Fprintf(c.stdout, "%s\n", r.Outcome.Primary.Headline)
			if r.Outcome.Fallback != nil {
				fmt.Fprintf(c.stdout, "fallback (%s): %s\n", r.Outcome.FallbackReason, r.Outcome.Fallback.Headline)
			}
			fmt.Fprintf(c.stdout, "report: %s\nbaseline: %s\n", r.Report, r.Baseline)
			if serve != "" {
				return c.serveResults(cmd.Context(), serve, out)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&out, "out", "report", "directory to write report.md, baseline.json and the charts into")
	fs.DurationVar(&sla, "sla", 0, "TTFT p95 SLA (default: the sweep's, else 400ms)")
	fs.DurationVar(&fallback, "fallback-sla", 0, "looser TTFT p95 target, evaluated when the breakpoints at --sla do not tell the modes apart: the baseline fails --sla at its lowest level, or both modes cross it at the same level (default: the sweep's, else 450ms)")
	fs.StringVar(&baseline, "baseline", "", "baseline mode (default: the sweep's, else round_robin)")
	fs.StringVar(&candidate, "candidate", "", "candidate mode (default: the sweep's, else kv)")
	fs.BoolVar(&png, "png", false, "also write the charts as PNG")
	fs.StringVar(&serve, "serve", "", "then serve the report as a web page on ADDR (host:port), in the live dashboard's style, until interrupted")
	return cmd
}

// serveResults serves the rendered report directory on addr until ctx
// ends.
func (c *cli) serveResults(ctx context.Context, addr, dir string) error {
	h, err := ui.ResultsHandler(dir)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for the results page: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stdout, "serving the report at http://%s/ (Ctrl-C stops)\n", lis.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve the results page: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve the results page: %w", err)
	}
	return nil
}

func override(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}
