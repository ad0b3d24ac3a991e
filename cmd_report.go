package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/report"
)

// cmdReport re-renders report.md, baseline.json and the charts from sweep
// output directories or sweep TSV files, averaging several sweeps: rows of
// one (mode, level) from different inputs are treated as runs.
func (c *cli) cmdReport(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	out := fs.String("out", "report", "directory to write report.md, baseline.json and the charts into")
	sla := fs.Duration("sla", 0, "TTFT p95 SLA (default: the sweep's, else 400ms)")
	fallback := fs.Duration("fallback-sla", 0, "fallback TTFT p95 threshold (default: the sweep's, else 450ms)")
	baseline := fs.String("baseline", "", "baseline mode (default: the sweep's, else round_robin)")
	candidate := fs.String("candidate", "", "candidate mode (default: the sweep's, else kv)")
	png := fs.Bool("png", false, "also write the charts as PNG")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: fleetbench report [flags] PATH...\n\n"+
			"PATH is a sweep output directory or a benchmark-sweep-*.tsv file.\n"+
			"Several paths are averaged: rows of one mode and level become runs.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	if *sla < 0 || *fallback < 0 {
		fmt.Fprintln(c.stderr, "fleetbench report: --sla and --fallback-sla must not be negative")
		return errUsage
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := report.Load(fs.Args()...)
	if err != nil {
		return err
	}
	override(&s.SLA, *sla)
	override(&s.FallbackSLA, *fallback)
	if *baseline != "" {
		s.Baseline = *baseline
	}
	if *candidate != "" {
		s.Candidate = *candidate
	}
	r, err := report.Render(*out, s, report.Options{PNG: *png})
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
}

func override(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}
