// Package coordinator is fleetbench's coordinator: it accepts agents on one
// gRPC stream each, shards the conversations of each stage across them,
// opens and closes the measurement windows, and merges the agents' HDR
// histograms into exact fleet-wide results. It owns the run's state and the
// merge; it sends no load itself. It must not import agent/ or fleet/
// (scripts/check-imports.sh): fleet/ is built on it, not the other way
// round.
//
// One goroutine (Run's loop) owns every piece of run state; gRPC streams
// feed it through a channel and receive its messages through per-connection
// queues. Generated protobuf types stop at the edge (server.go, convert.go).
package coordinator
