// Package load is fleetbench's load engine. It drives conversations from a
// workload.Source through a Streamer into a record.Recorder, either as a
// closed loop (a fixed number of sessions, each with at most one turn in
// flight) or as an open loop (conversations arriving at a rate from a
// schedule fixed at the start, so coordinated omission shows as lag). It
// owns when each turn is sent; what is sent is pkg/workload's, how it is
// measured pkg/client's and how it is aggregated pkg/record's. It must not
// import coordinator/, agent/ or the simulator: an agent and a single-engine
// run use it alike.
//
// Every turn is stamped with the measurement window in force when it was
// sent; Watermark tells when a window has no turn left in flight, so an
// agent can ship it. One goroutine runs each session; nothing spawns a
// goroutine per token, and no lock is held across I/O.
package load
