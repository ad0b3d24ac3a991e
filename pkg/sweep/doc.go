// Package sweep describes an A/B sweep (concurrency levels x routing modes x
// repeated runs) and turns it into a plan: the ordered steps a runner
// executes (switch the routing mode, wait until the target is ready, prime,
// warm up, measure, cool down). It also holds the mode switches that change
// the serving stack's routing mode between blocks of levels. It runs no load
// and must not import pkg/sweep/runner, fleet/, the coordinator or
// pkg/report: the runner that executes a Plan is pkg/sweep/runner, so the
// spec and plan stay free of load and report dependencies.
//
// A Spec is read from a YAML file (Load, parse.go) and from command-line
// flags (RegisterFlags, ApplyFlags); flags the user set override the file.
// Validate (validate.go) checks it and joins every problem.
package sweep
