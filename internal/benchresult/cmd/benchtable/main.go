// Command benchtable keeps benchmark figures as data (package benchresult).
//
//	benchtable exec -part FILE -- COMMAND...  run a benchmark command, show its output, keep its figures in FILE
//	benchtable record -out DIR PART...        join the parts into one results file in DIR
//	benchtable table [-results DIR] [-out FILE]  regenerate the table from every results file
//
// `make bench`, `make soak`, `make calibrate` and the benchmark bundle's
// run script use it; docs/benchmarks.md is its table.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/fleetbench/fleetbench/internal/benchresult"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := benchresult.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			os.Exit(max(ee.ExitCode(), 1))
		}
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}
