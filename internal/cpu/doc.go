// Package cpu reads a process's CPU time and turns readings of it into cores
// used. It imports no other fleetbench package and holds no global state;
// what the figure is used for (a run's CPU cost, the dashboard) is its
// callers'.
package cpu
