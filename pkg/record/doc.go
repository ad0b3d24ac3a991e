// Package record turns per-request results into per-window HDR histograms
// and counters that merge losslessly across goroutines, agents and runs. It
// owns aggregation only: pkg/result turns one merged window into its outputs
// (result.json, the block, thresholds), and pkg/report writes a sweep's
// reports across levels x modes. It does no I/O and must not import either
// of them, the simulator or the coordinator.
//
// The load engine hands each finished turn to a Recorder as a Sample; the
// Recorder adds it to the Window of the coordinator window in force when the
// turn was sent, and Drain returns the interval's Windows. Windows (one
// histogram per Metric, per-turn stats, Counters) merge associatively, so
// agents' intervals combine into run totals in any order.
//
// Sample is a fixed contract (docs/design.md).
package record
