package testserve

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcCPU reads process pid's user+system CPU time from /proc (0 when it
// cannot), for benchmarks that run a server or a command in a child
// process and count its CPU alone.
func ProcCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// utime and stime are the 12th and 13th fields after the command
	// name, which is in parentheses, in clock ticks (100 per second on
	// Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
