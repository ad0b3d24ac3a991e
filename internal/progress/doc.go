// Package progress shows the progress of a long command on stderr: one
// status line redrawn in place on a terminal, with every log line written
// above it (never glued onto it), or a log line now and then when stderr is
// not a terminal. The run command and the sweep both show their progress
// with a Display; what the line says is theirs (a LineFunc), and this
// package must not know about runs, sweeps or any other fleetbench package.
package progress
