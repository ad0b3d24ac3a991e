package load

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target (as in GOGC) that fleetbench's
// load generators run with. A collection's mark phase takes a quarter of
// the CPUs (one whole core of two) for tens of milliseconds at thousands of
// streams, and every stream waiting for a core then reads its tokens late:
// collections show up as client-added latency. At 400 the heap may grow to
// five times the live data between collections (about 0.85 GB at 8,000
// streams instead of 0.35 GB) and collections are four times rarer.
const GCPercent = 400

// TuneGC sets the collector's target to GCPercent unless the GOGC
// environment variable sets one, which then stays in force.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
