package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbench/fleetbench/pkg/report"
)

// reportCmd re-renders report.md, baseline.json and the charts from sweep
// output directories or sweep TSV files, averaging several sweeps: rows of
// one (mode, level) from different inputs are treated as runs.
func (c *cli) reportCmd() *cobra.Command {
	var (
		out, baseline, candidate string
		sla, fallback            time.Duration
		png                      bool
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
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&out, "out", "report", "directory to write report.md, baseline.json and the charts into")
	fs.DurationVar(&sla, "sla", 0, "TTFT p95 SLA (default: the sweep's, else 400ms)")
	fs.DurationVar(&fallback, "fallback-sla", 0, "fallback TTFT p95 threshold (default: the sweep's, else 450ms)")
	fs.StringVar(&baseline, "baseline", "", "baseline mode (default: the sweep's, else round_robin)")
	fs.StringVar(&candidate, "candidate", "", "candidate mode (default: the sweep's, else kv)")
	fs.BoolVar(&png, "png", false, "also write the charts as PNG")
	return cmd
}

func override(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}
