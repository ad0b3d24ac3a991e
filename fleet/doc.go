// Package fleet runs load with a coordinator and its agents: it is the one
// package that wires coordinator/ and agent/ together, so the command layer
// only binds flags to its configurations and calls them. Nothing below it
// (coordinator/, agent/, pkg/, internal/) may import it
// (scripts/check-imports.sh), and it must not import generated protobuf
// code: it talks to both ends through their Go APIs.
//
//   - Run runs a coordinator's stages with K agents in this process over
//     loopback gRPC, or with external agents (Config.Remote), which Serve
//     serves: the coordinator command's fleet is a Serve too.
//   - Sweeper is a runner.Fleet: one coordinator run for a whole sweep.
//   - MeasureStage, WriteStages and PrintStages turn a coordinator's result
//     into a stage's measurement and its outputs.
//   - RunConfig is the run command's engine: one level against a target
//     (or the built-in simulator), with one load engine or with agents,
//     printing vLLM's block and writing result.json.
package fleet
