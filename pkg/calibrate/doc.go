// Package calibrate runs the simulator through the sweep of a published
// benchmark and compares the figures a client measures with the published
// ones. It owns that comparison, not the simulator: pkg/sim must not import
// it or anything else of the measurement side, so calibrate drives the
// simulator only the way a user does. The load engine plays document chats
// over HTTP, TTFT is taken client-side after a warm-up, and the hit rate
// comes from the workers' prefix-cache counters. Durations in its results
// are simulated time (wall time x time scale).
package calibrate
