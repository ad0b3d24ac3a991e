// Package runner executes a sweep.Plan: for every mode block it switches the
// routing mode, waits for readiness and primes, then runs each level
// (warm-up, measurement, cooldown) and writes its point to the output
// directory as soon as the level ends, so an interrupted sweep loses at most
// the level it was measuring and can be resumed. It owns the order of a
// sweep's steps, resume and restore. It runs no load itself and must not
// import fleet/, coordinator/ or agent/: load runs through the Fleet and
// Measurer interfaces it is given.
//
// The runner does not run load itself: a Fleet runs every level in order on
// one set of agents (the fleetbench command runs one coordinator run for the
// whole sweep, with local or remote agents), and calls back into the runner
// between levels, with no load running, for the switches, readiness gates
// and cooldowns. A Measurer that runs one level at a time also works
// (PerLevel). So the runner's ordering, resume and restore logic is tested
// without any server. It lives apart from pkg/sweep so that the spec and
// plan stay free of load and report dependencies.
package runner
