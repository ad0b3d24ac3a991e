// Package agent is fleetbench's agent: it dials a coordinator, runs the
// conversations of its shard with the load engine, and streams interval
// histograms back, keeping every report until the coordinator acks it. It
// owns one process's share of the load and its link to the coordinator. It
// must not import coordinator/ or fleet/ (scripts/check-imports.sh): the two
// ends meet only on the wire, and fleet/ wires them together in one process.
//
// One goroutine (the loop, loop.go) owns the agent's state: the engine
// (engine.go), the reports not yet acked (reports.go) and the current link
// to the coordinator. The connector goroutine dials with capped exponential
// backoff and hands each new link to the loop. Generated protobuf types stop
// at conn.go and convert.go.
package agent
