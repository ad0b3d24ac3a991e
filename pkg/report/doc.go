// Package report turns the measurements of a sweep (concurrency levels x
// routing modes x repeated runs) into the files people and dashboards read:
// the sweep TSV, report.md, baseline.json, SVG charts, and per point
// HdrHistogram interval logs and a vLLM-style result.json. It owns the
// comparison across levels and modes; pkg/result owns one merged window's
// outputs, which report reuses per point, and pkg/record the per-window
// histograms it merges. It must not run load, switch modes or import the
// sweep runner: it only reads the points it is handed.
//
// # Inputs
//
// The sweep runner hands over one Point per (run, mode, level): the merged
// measurement window of every agent. A Sweep carries the points and the
// facts of the sweep (modes, levels, SLA).
//
// # Percentiles across runs
//
// Percentiles are never averaged when histograms are available: the
// across-runs figure of a (mode, level) comes from merging the runs'
// windows. The per-run values are shown separately as a spread (mean ± 95%
// confidence interval, Student t with n−1 degrees of freedom). When only
// TSV files are given (fleetbench report FILE.tsv ...), there are no
// histograms, so the percentiles of the runs are averaged and the report
// says so.
//
// # SLA breakpoint
//
// A mode's breakpoint is the highest level before its first failure: the
// highest level L such that its TTFT p95 is at or under the SLA at L and at
// every lower level measured. A mode that fails at its lowest level has no
// breakpoint ("None"). When a mode passes again above its first failure the
// report says so, but the breakpoint stays below the first failure, because
// "the mode stays at or under the SLA up to L" is the claim users quote.
//
// # Run-to-run noise
//
// With two or more runs per mode, a KV-versus-baseline difference at a level
// is "within run-to-run noise" when Welch's two-sided t-test on the per-run
// values is not significant at the 5% level (unequal variances,
// Welch–Satterthwaite degrees of freedom). Welch is used rather than
// "confidence intervals overlap" because overlapping 95% intervals can hide a
// significant difference.
//
// # Concurrency
//
// Functions of this package are safe for concurrent use on distinct
// arguments; an Appender or Writer must be used by one goroutine at a time.
package report
