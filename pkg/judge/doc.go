// Package judge owns fleetbench's judgements of a measurement: vLLM's
// goodput objectives (SLO: which requests count as good, hence goodput and
// SLO attainment), k6-style pass/fail thresholds on a result (Threshold,
// Verdict, ThresholdError), and the SLA breakpoint of a mode over a sweep's
// levels (Breakpoint, FindBreakpoint).
//
// It decides; it does not measure, format or print. It must not read
// clocks, do I/O, log, or import the packages that build results and
// reports (pkg/result, pkg/report): they call judge, never the other way
// round. Its inputs are plain values (record samples and windows, a Rater
// for a result's rates, p95s per level), so every judgement is a pure
// function that tests can reach directly.
package judge
