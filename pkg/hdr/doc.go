// Package hdr wraps HdrHistogram with fleetbench's one histogram
// configuration, clamping with counts, lossless merge, V2 encoding and the
// uncompressed sparse form agents send (Sparse). It owns how a latency is
// bucketed, merged and encoded, and nothing about what a latency means. It
// imports no other fleetbench package and keeps no global state but a pool
// of encoders; a Histogram is not safe for concurrent use, so callers record
// under a mutex or per goroutine.
//
// Every latency in fleetbench is recorded in microseconds into a Histogram
// built from one Config (normally Default). Histograms of the same Config
// merge losslessly across goroutines, agents and runs; histograms of
// different Configs refuse to merge or decode (ErrConfigMismatch), because
// their buckets mean different things.
//
// # Reported values
//
// Percentiles follow the HdrHistogram convention: Percentile and the
// percentiles of Summary report the highest value equivalent to the
// nearest-rank sample (the top of its bucket), so a reported latency is never
// below the true one and exceeds it by less than the precision (under 0.1% of
// the value at 3 significant figures; exact below 2,048 µs). Max is also the
// highest equivalent value, Min the lowest equivalent value, Mean and Std use
// each bucket's median equivalent value.
//
// # Clamping
//
// The trackable range of a Histogram is 0..HighestMicros. A value above it is
// recorded as HighestMicros and a negative value as 0; both are counted in
// Clamped, never dropped. Values between 0 and LowestMicros are not clamped:
// LowestMicros is HdrHistogram's lowest discernible value, the resolution of
// the first bucket, not a lower bound (with Default's 1 µs, a 0 µs gap is
// recorded exactly as 0).
package hdr
