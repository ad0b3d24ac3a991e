// Package benchresult keeps benchmark figures as data: it parses the output
// of `go test -bench`, attaches the command and the machine's facts, writes
// one results file per run under bench/results, and regenerates the table of
// the latest figures beside their goals (docs/benchmarks.md). It owns the
// results files and the table, not the benchmarks: it imports no other
// fleetbench package and runs nothing but the command it is given. A run is
// data, never documentation: it must not edit any doc but the generated
// table.
package benchresult
